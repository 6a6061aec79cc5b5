package main

import (
	"errors"
	"flag"
	"io"
	"os"
	"strings"
	"testing"
)

// cert, health, import and export take one --endpoint: a URL as serve
// prints it, or host:port; a bare host is Orrery's port, a URL without a
// port its scheme's.
func TestOneEndpointFlagTakesAURLOrHostPort(t *testing.T) {
	for _, c := range []struct{ in, url, hostport string }{
		{"http://localhost:8081/", "http://localhost:8081/", "localhost:8081"},
		{"https://localhost:8081", "https://localhost:8081/", "localhost:8081"},
		{"localhost:9000", "http://localhost:9000/", "localhost:9000"},
		{"127.0.0.1", "http://127.0.0.1:8081/", "127.0.0.1:8081"},
		{"orrery", "http://orrery:8081/", "orrery:8081"},
		{"https://acct.documents.azure.com/", "https://acct.documents.azure.com/", "acct.documents.azure.com:443"},
		{"http://[::1]:8081/", "http://[::1]:8081/", "[::1]:8081"},
	} {
		u, err := endpointURL(c.in)
		if err != nil || u != c.url {
			t.Errorf("endpointURL(%q) = %q, %v; want %q", c.in, u, err, c.url)
		}
		hp, err := endpointHostPort(c.in)
		if err != nil || hp != c.hostport {
			t.Errorf("endpointHostPort(%q) = %q, %v; want %q", c.in, hp, err, c.hostport)
		}
	}
	for _, bad := range []string{"ftp://x/", "http://", "::::"} {
		if _, err := endpointURL(bad); err == nil {
			t.Errorf("endpointURL(%q) accepted it", bad)
		}
	}
}

// --help names --endpoint's value URL: the flag package takes the first
// back-quoted word of a usage as the value's name, so "as `orrery serve`
// prints it" showed "-endpoint orrery serve" in every command's help.
func TestEndpointFlagHelpNamesItsValueURL(t *testing.T) {
	fs := flag.NewFlagSet("cert", flag.ContinueOnError)
	var endpoint string
	endpointFlag(fs, &endpoint)
	name, usage := flag.UnquoteUsage(fs.Lookup("endpoint"))
	if name != "URL" || !strings.Contains(usage, "orrery serve") || !strings.Contains(usage, "host:port") {
		t.Fatalf("--endpoint's help shows %q: %q; want the value named URL, saying orrery serve prints it and host:port works", name, usage)
	}
}

// Every command's --help starts with how it is called, as cert's and
// import's did, rather than the flag package's bare "Usage of export:".
func TestEveryCommandsHelpSaysHowItIsCalled(t *testing.T) {
	for _, c := range []struct {
		run  func([]string) error
		want string
	}{
		{cert, "Usage: orrery cert "},
		{health, "Usage: orrery health "},
		{importCmd, "Usage: orrery import "},
		{exportCmd, "Usage: orrery export "},
		{faultsAdd, "Usage: orrery faults add "},
		{faultsList, "Usage: orrery faults list "},
		{faultsClear, "Usage: orrery faults clear "},
	} {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		stderr := os.Stderr
		os.Stderr = w
		err = c.run([]string{"-h"})
		os.Stderr = stderr
		w.Close()
		out, _ := io.ReadAll(r)
		r.Close()
		if !errors.Is(err, flag.ErrHelp) || !strings.HasPrefix(string(out), c.want) || !strings.Contains(string(out), "-endpoint URL") {
			t.Errorf("%s--help: %v\n%s", c.want, err, out)
		}
	}
}
