package main

import (
	"encoding/base64"
	"strings"
	"testing"
)

// TestExternalEndpointNeedsKey: an endpoint without a key stops before any
// request, saying what to pass.
func TestExternalEndpointNeedsKey(t *testing.T) {
	t.Setenv("COSMOS_KEY", "")
	t.Setenv("COSMOS_ENDPOINT", "")
	err := run([]string{"--endpoint", "https://example.documents.azure.com:443/"})
	if err == nil || !strings.Contains(err.Error(), "pass --key KEY or set COSMOS_KEY") {
		t.Fatalf("run without --key: %v; want a message naming --key and COSMOS_KEY", err)
	}
}

// TestExternalEndpointRefusedKey: a well-formed key the endpoint refuses
// ends in a sentence saying so and what to pass, not in the SDK's dump of
// the 401 response; a key that is not base64 and an endpoint that is not a
// URL are named as such.
func TestExternalEndpointRefusedKey(t *testing.T) {
	emb, err := startEmbedded(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer emb.close()
	t.Setenv("COSMOS_KEY", "")
	t.Setenv("COSMOS_ENDPOINT", "")
	wrong := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("not the key ", 6)))
	err = run([]string{"--endpoint", emb.endpoint, "--key", wrong, "--addr", "127.0.0.1:0"})
	if err == nil {
		t.Fatal("run with a wrong key succeeded")
	}
	msg := err.Error()
	for _, want := range []string{"refused the key (401 Unauthorized)", "--key"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q lacks %q", msg, want)
		}
	}
	for _, dump := range []string{"RESPONSE", "ERROR CODE", "authorization", "\n"} {
		if strings.Contains(msg, dump) {
			t.Errorf("message %q contains the raw response (%q)", msg, dump)
		}
	}

	err = run([]string{"--endpoint", emb.endpoint, "--key", "not base64!"})
	if err == nil || !strings.Contains(err.Error(), "--key is not an account key") {
		t.Errorf("run with a key that is not base64: %v", err)
	}
	err = run([]string{"--endpoint", "localhost:8081", "--key", wrong})
	if err == nil || !strings.Contains(err.Error(), "is not a URL like https://") {
		t.Errorf("run with an endpoint that is not a URL: %v", err)
	}
}
