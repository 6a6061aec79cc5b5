package main

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/orrery-db/orrery/server"
)

// defaultEndpoint is where cert, import and export find a server unless
// told otherwise: the one `orrery serve` starts.
const defaultEndpoint = "http://localhost:8081/"

// endpointFlag registers --endpoint, the one name cert, import and export
// give the server they talk to: a URL (https:// or http://, which Orrery
// answers on one port) or host:port, from ORRERY_ENDPOINT by default.
func endpointFlag(fs *flag.FlagSet, p *string) {
	fs.StringVar(p, "endpoint", env("ORRERY_ENDPOINT", defaultEndpoint),
		"the account endpoint: a `URL` as 'orrery serve' prints it, or host:port (env ORRERY_ENDPOINT)")
}

// setUsage makes fs's help start with how its command is called, then list
// its flags.
func setUsage(fs *flag.FlagSet, line string) {
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), line)
		fs.PrintDefaults()
	}
}

// endpointURL spells an --endpoint as a URL: host:port becomes
// http://host:port/, a bare host http://host:8081/.
func endpointURL(endpoint string) (string, error) {
	if !strings.Contains(endpoint, "://") {
		if _, _, err := net.SplitHostPort(endpoint); err != nil && !strings.Contains(endpoint, "/") {
			endpoint = net.JoinHostPort(strings.Trim(endpoint, "[]"), "8081")
		}
		endpoint = "http://" + endpoint
	}
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return "", fmt.Errorf("--endpoint %q is not a URL like https://localhost:8081/ or a host:port", endpoint)
	}
	if u.Path == "" {
		u.Path = "/"
	}
	return u.String(), nil
}

// endpointHostPort is the host:port an endpoint's TLS listens on: a URL
// without a port has its scheme's (443, 80), a bare host Orrery's 8081.
func endpointHostPort(endpoint string) (string, error) {
	full, err := endpointURL(endpoint)
	if err != nil {
		return "", err
	}
	u, _ := url.Parse(full)
	if u.Port() != "" {
		return u.Host, nil
	}
	switch {
	case !strings.Contains(endpoint, "://"):
		return net.JoinHostPort(u.Hostname(), "8081"), nil
	case u.Scheme == "https":
		return net.JoinHostPort(u.Hostname(), "443"), nil
	default:
		return net.JoinHostPort(u.Hostname(), "80"), nil
	}
}

// cert prints the certificate a server serves, as PEM on standard output,
// and says on standard error what it printed and where it came from. It
// asks the server at --endpoint and takes the certificate only if the
// server also serves it at server.CertificatePath, as Orrery and the
// official emulator do: whatever else answers on the port is refused. With
// no server answering it reads the one saved in --data. It creates
// nothing.
func cert(args []string) error {
	fs := flag.NewFlagSet("cert", flag.ContinueOnError)
	var endpoint string
	endpointFlag(fs, &endpoint)
	data := fs.String("data", env("ORRERY_DATA", "./orrery-data"), "data directory holding the certificate, read when no server answers (env ORRERY_DATA)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "Usage: orrery cert [flags] > orrery.pem\n\nPrints the TLS certificate of the Orrery server at --endpoint, for clients to trust.")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	hostport, err := endpointHostPort(endpoint)
	if err != nil {
		return err
	}
	chain, askErr := servedCertificate(hostport)
	var from string
	switch {
	case askErr == nil:
		from = "served by https://" + hostport + "/ (and at " + server.CertificatePath + ")"
	case errors.Is(askErr, errNotOrrery):
		return askErr
	default:
		file, ferr := filepath.Abs(filepath.Join(*data, server.CertFile))
		if ferr != nil {
			return ferr
		}
		pemBytes, err := os.ReadFile(file)
		if err != nil {
			return fmt.Errorf("no server answered at %s (%v), and %s holds no certificate (%v): start `orrery serve`, or name its --endpoint", hostport, askErr, *data, err)
		}
		if chain, err = parseChain(pemBytes); err != nil {
			return fmt.Errorf("%s: %w", file, err)
		}
		from = "saved in " + file + " (no server answered at " + hostport + ")"
	}
	leaf := chain[0]
	fmt.Fprintf(os.Stderr, "orrery cert: the certificate %s\n  subject %s, for %s\n  SHA-256 fingerprint %s\n  valid until %s\n",
		from, leaf.Subject.String(), strings.Join(certNames(leaf), ", "), fingerprint(leaf), leaf.NotAfter.UTC().Format(time.DateOnly))
	var out bytes.Buffer
	for _, c := range chain {
		pem.Encode(&out, &pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
	}
	_, err = os.Stdout.Write(out.Bytes())
	return err
}

// errNotOrrery: something answered TLS on the port but did not serve its
// certificate where Orrery does.
var errNotOrrery = errors.New("not an Orrery")

// servedCertificate connects to hostport over TLS without verifying it,
// then asks, on that very connection, for the certificate at
// server.CertificatePath: the server must serve the one it presented.
func servedCertificate(hostport string) ([]*x509.Certificate, error) {
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 3 * time.Second}, "tcp", hostport, &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12})
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	chain := conn.ConnectionState().PeerCertificates
	if len(chain) == 0 {
		return nil, fmt.Errorf("%s presented no certificate", hostport)
	}
	refuse := func(why string) error {
		return fmt.Errorf("%w: %s presented a certificate (subject %s, SHA-256 %s) but %s, as Orrery and the Cosmos DB emulator do; refusing to print it",
			errNotOrrery, hostport, chain[0].Subject, fingerprint(chain[0]), why)
	}
	req, err := http.NewRequest(http.MethodGet, "https://"+hostport+server.CertificatePath, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("User-Agent", "orrery-cert/"+version)
	if err := req.Write(conn); err != nil {
		return nil, refuse("did not answer a request for " + server.CertificatePath + " (" + err.Error() + ")")
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), req)
	if err != nil {
		return nil, refuse("did not answer a request for " + server.CertificatePath + " (" + err.Error() + ")")
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil || resp.StatusCode != http.StatusOK {
		return nil, refuse(fmt.Sprintf("answered %s to %s", resp.Status, server.CertificatePath))
	}
	served, err := parseChain(body)
	if err != nil || !served[0].Equal(chain[0]) {
		return nil, refuse("serves another certificate at " + server.CertificatePath)
	}
	return chain, nil
}

// parseChain parses the certificates of a PEM file.
func parseChain(pemBytes []byte) ([]*x509.Certificate, error) {
	var chain []*x509.Certificate
	for {
		var block *pem.Block
		block, pemBytes = pem.Decode(pemBytes)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, err
		}
		chain = append(chain, c)
	}
	if len(chain) == 0 {
		return nil, errors.New("no certificate in it")
	}
	return chain, nil
}

// certNames lists the host names and addresses a certificate is for.
func certNames(c *x509.Certificate) []string {
	names := append([]string(nil), c.DNSNames...)
	for _, ip := range c.IPAddresses {
		names = append(names, ip.String())
	}
	return names
}

// fingerprint is the SHA-256 of a certificate, as browsers show it.
func fingerprint(c *x509.Certificate) string {
	sum := sha256.Sum256(c.Raw)
	parts := make([]string, len(sum))
	for i, b := range sum {
		parts[i] = fmt.Sprintf("%02X", b)
	}
	return strings.Join(parts, ":")
}
