package main

import (
	"crypto/tls"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// health asks the server at --endpoint whether it is ready (GET /_health)
// and exits 0 when it is: a container's health check, where no curl is.
// Over https it does not verify the certificate: it checks liveness, and
// sends no credential.
func health(args []string) error {
	fs := flag.NewFlagSet("health", flag.ContinueOnError)
	var endpoint string
	endpointFlag(fs, &endpoint)
	timeout := fs.Duration("timeout", 5*time.Second, "time the server has to answer")
	setUsage(fs, "Usage: orrery health [flags]   (exit 0 when the server at --endpoint is ready)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	u, err := endpointURL(endpoint)
	if err != nil {
		return err
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.TLSClientConfig = &tls.Config{InsecureSkipVerify: true}
	client := &http.Client{Timeout: *timeout, Transport: transport}
	resp, err := client.Get(strings.TrimSuffix(u, "/") + "/_health")
	if err != nil {
		return fmt.Errorf("not ready: %w", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"ready"`) {
		return fmt.Errorf("not ready: %s %s", resp.Status, body)
	}
	fmt.Println("ready")
	return nil
}
