package probes

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// httpRequest builds the request the kubelet's prober would send.
func httpRequest(ctx context.Context, g *corev1.HTTPGetAction, t Target, userAgent string) (*http.Request, error) {
	port, err := ResolvePort(g.Port, t.Container)
	if err != nil {
		return nil, err
	}
	host := g.Host
	if host == "" {
		host = t.PodIP
	}
	scheme := strings.ToLower(string(g.Scheme))
	if scheme == "" {
		scheme = "http"
	}
	path := g.Path
	if path != "" && !strings.HasPrefix(path, "/") {
		path = "/" + path
	}
	u, err := url.Parse(scheme + "://" + net.JoinHostPort(host, strconv.Itoa(port)) + path)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("User-Agent", userAgent)
	req.Header.Set("Accept", "*/*")
	// The user's headers replace the defaults; an empty value removes
	// one (an explicit empty Accept sends none); Host sets the request's.
	replaced := map[string]bool{}
	for _, hdr := range g.HTTPHeaders {
		name := http.CanonicalHeaderKey(hdr.Name)
		if name == "Host" {
			req.Host = hdr.Value
			continue
		}
		if !replaced[name] {
			req.Header.Del(name)
			replaced[name] = true
		}
		if hdr.Value != "" {
			req.Header.Add(name, hdr.Value)
		}
	}
	return req, nil
}

// httpProbe: 200-399 is success; redirects are followed on the same host
// (up to 10) and a redirect elsewhere is a success with a warning.
func (h *Handlers) httpProbe(ctx context.Context, g *corev1.HTTPGetAction, t Target, userAgent string) outcome {
	req, err := httpRequest(ctx, g, t, userAgent)
	if err != nil {
		return outcome{result: Failure, message: err.Error()}
	}
	client := &http.Client{Transport: h.transport, CheckRedirect: sameHostRedirects}
	resp, err := client.Do(req)
	if err != nil {
		return outcome{result: Failure, message: probeError(err)}
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxOutput))
	if resp.StatusCode >= http.StatusOK && resp.StatusCode < http.StatusBadRequest {
		if resp.StatusCode >= http.StatusMultipleChoices {
			return outcome{result: Success, warning: true, message: "Probe terminated redirects, Response body: ", output: string(body)}
		}
		return outcome{result: Success, output: string(body)}
	}
	return outcome{result: Failure, message: fmt.Sprintf("HTTP probe failed with statuscode: %d", resp.StatusCode)}
}

func sameHostRedirects(req *http.Request, via []*http.Request) error {
	if req.URL.Hostname() != via[0].URL.Hostname() {
		return http.ErrUseLastResponse
	}
	if len(via) >= 10 {
		return errors.New("stopped after 10 redirects")
	}
	return nil
}
