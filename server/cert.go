package server

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// Certificate file names inside the data directory.
const (
	CertFile = "tls-cert.pem"
	KeyFile  = "tls-key.pem"
)

// LoadOrCreateCertificate returns the server's TLS certificate and its PEM.
// With a directory, it is read from there, or generated and saved on first
// start (self-signed, for localhost, 127.0.0.1, ::1, the host name and the
// extra names: host names or IP addresses). A saved certificate that does not
// cover every extra name is replaced by a new one that does. With dir == ""
// a fresh certificate is made in memory.
func LoadOrCreateCertificate(dir string, extraNames ...string) (tls.Certificate, []byte, error) {
	if dir != "" {
		certPEM, err1 := os.ReadFile(filepath.Join(dir, CertFile))
		keyPEM, err2 := os.ReadFile(filepath.Join(dir, KeyFile))
		if err1 == nil && err2 == nil {
			cert, err := tls.X509KeyPair(certPEM, keyPEM)
			if err != nil {
				return cert, nil, err
			}
			if coversNames(cert, extraNames) {
				return cert, certPEM, nil
			}
		} else if !errors.Is(err1, fs.ErrNotExist) && err1 != nil {
			return tls.Certificate{}, nil, err1
		}
	}
	certPEM, keyPEM, err := generateCertificate(extraNames)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	if dir != "" {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return tls.Certificate{}, nil, err
		}
		if err := os.WriteFile(filepath.Join(dir, KeyFile), keyPEM, 0o600); err != nil {
			return tls.Certificate{}, nil, err
		}
		if err := os.WriteFile(filepath.Join(dir, CertFile), certPEM, 0o644); err != nil {
			return tls.Certificate{}, nil, err
		}
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	return cert, certPEM, err
}

// ReadCertificate returns the PEM of the certificate saved in dir, without
// creating one.
func ReadCertificate(dir string) ([]byte, error) {
	return os.ReadFile(filepath.Join(dir, CertFile))
}

// coversNames reports whether the certificate is valid for every name.
func coversNames(cert tls.Certificate, names []string) bool {
	if len(names) == 0 {
		return true
	}
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		return false
	}
	for _, n := range names {
		if leaf.VerifyHostname(n) != nil {
			return false
		}
	}
	return true
}

func generateCertificate(extraNames []string) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		return nil, nil, err
	}
	names := []string{"localhost"}
	if h, err := os.Hostname(); err == nil && h != "" && h != "localhost" {
		names = append(names, h)
	}
	ips := []net.IP{net.ParseIP("127.0.0.1"), net.IPv6loopback}
	for _, n := range extraNames {
		if ip := net.ParseIP(n); ip != nil {
			ips = append(ips, ip)
		} else if n != "" {
			names = append(names, n)
		}
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "Orrery local server", Organization: []string{"Orrery"}},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().AddDate(10, 0, 0),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		DNSNames:              names,
		IPAddresses:           ips,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, fmt.Errorf("server: creating the TLS certificate: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), nil
}
