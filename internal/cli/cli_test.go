package cli

import (
	"errors"
	"flag"
	"io"
	"slices"
	"testing"
)

func TestWordsTakesFlagsAnywhere(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	out := fs.String("o", "", "")
	words, err := Words(fs, []string{"get", "-o", "json", "pods", "web"})
	if err != nil || !slices.Equal(words, []string{"get", "pods", "web"}) || *out != "json" {
		t.Fatalf("words %v, -o %q, err %v", words, *out, err)
	}
	_, err = Words(fs, []string{"get", "--nope"})
	var usage UsageError
	if !errors.As(err, &usage) {
		t.Fatalf("an unknown flag must be a UsageError, got %v", err)
	}
}
