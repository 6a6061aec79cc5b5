package main

import "testing"

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
