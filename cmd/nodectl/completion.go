package main

import (
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Completion asks the agent for what it lists: pod names, a pod's
// containers. An agent that does not answer completes nothing, and a name
// the API server would refuse (whoever answers on the read-only port) is
// not offered to the shell.

func completePods(newClient func() *client) cobra.CompletionFunc {
	return func(_ *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return podNames(newClient(), toComplete), cobra.ShellCompDirectiveNoFileComp
	}
}

// completeTypeThenPods completes a resource type, then pod names.
func completeTypeThenPods(newClient func() *client, types map[string][]string) cobra.CompletionFunc {
	return func(_ *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) == 0 {
			var out []string
			for t := range types {
				if strings.HasPrefix(t, toComplete) {
					out = append(out, t)
				}
			}
			return sortedStrings(out), cobra.ShellCompDirectiveNoFileComp
		}
		if t := args[0]; t == "pods" || t == "pod" || t == "po" {
			return podNames(newClient(), toComplete), cobra.ShellCompDirectiveNoFileComp
		}
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
}

func completeContainers(newClient func() *client) cobra.CompletionFunc {
	return func(_ *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) == 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		p, err := newClient().findPod(args[0])
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var out []string
		for _, c := range append(append(p.Spec.InitContainers, p.Spec.Containers...), ephemeralAsContainers(p)...) {
			if strings.HasPrefix(c.Name, toComplete) && len(validation.IsDNS1123Label(c.Name)) == 0 {
				out = append(out, c.Name)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

func completeOutput(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
	return []string{"json", "yaml", "wide", "name", "jsonpath=", "go-template=", "custom-columns="}, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveNoSpace
}

func podNames(c *client, prefix string) []string {
	pods, err := c.pods()
	if err != nil {
		return nil
	}
	var out []string
	for _, p := range pods {
		if strings.HasPrefix(p.Name, prefix) && len(validation.IsDNS1123Subdomain(p.Name)) == 0 {
			out = append(out, p.Name)
		}
	}
	return sortedStrings(out)
}

func sortedStrings(s []string) []string {
	sort.Strings(s)
	return s
}
