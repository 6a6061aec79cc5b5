package orrerytest

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/golang-jwt/jwt/v5"
)

// Issuer is a test identity provider: it signs Entra ID (AAD) style JWTs
// (RS256) with a key it generates, and publishes that key as a JSON Web Key
// Set. Give its Keys to a server in verify mode (Options.AAD) and its
// Credential to azcosmos.NewClient.
type Issuer struct {
	// Name is the iss claim of its tokens.
	Name string
	// KeyID is the kid header of its tokens.
	KeyID string
	key   *rsa.PrivateKey
}

// NewIssuer generates an issuer with a fresh 2048-bit RSA key.
func NewIssuer() (*Issuer, error) {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	return &Issuer{Name: "https://sts.windows.net/00000000-0000-0000-0000-000000000000/", KeyID: "orrerytest", key: k}, nil
}

// Keys are the issuer's public keys by key id (server.AAD.Keys).
func (i *Issuer) Keys() map[string]*rsa.PublicKey {
	return map[string]*rsa.PublicKey{i.KeyID: &i.key.PublicKey}
}

// JWKS is the issuer's public key as a JSON Web Key Set, the file
// `orrery serve --aad-jwks` reads.
func (i *Issuer) JWKS() []byte {
	pub := i.key.PublicKey
	b, _ := json.Marshal(map[string]any{"keys": []map[string]string{{
		"kty": "RSA", "use": "sig", "alg": "RS256", "kid": i.KeyID,
		"n": base64.RawURLEncoding.EncodeToString(pub.N.Bytes()),
		"e": base64.RawURLEncoding.EncodeToString(big.NewInt(int64(pub.E)).Bytes()),
	}}})
	return b
}

// Mint signs claims as a token of the issuer (iss is set when missing).
func (i *Issuer) Mint(claims jwt.MapClaims) (string, error) {
	if _, ok := claims["iss"]; !ok {
		claims["iss"] = i.Name
	}
	t := jwt.NewWithClaims(jwt.SigningMethodRS256, claims)
	t.Header["kid"] = i.KeyID
	return t.SignedString(i.key)
}

// Credential is an azcore.TokenCredential whose tokens name the principal
// oid, for the audience the SDK asks for (its scope without "/.default"),
// valid for an hour. Edit, when set, changes the claims before signing:
// tests of refused tokens use it.
func (i *Issuer) Credential(oid string, edit func(jwt.MapClaims)) azcore.TokenCredential {
	return &issuerCredential{issuer: i, oid: oid, edit: edit}
}

type issuerCredential struct {
	issuer *Issuer
	oid    string
	edit   func(jwt.MapClaims)
}

// GetToken implements azcore.TokenCredential.
func (c *issuerCredential) GetToken(_ context.Context, opts policy.TokenRequestOptions) (azcore.AccessToken, error) {
	now := time.Now()
	aud := "https://cosmos.azure.com"
	if len(opts.Scopes) > 0 {
		aud = strings.TrimSuffix(opts.Scopes[0], "/.default")
	}
	claims := jwt.MapClaims{
		"aud": aud, "oid": c.oid, "sub": c.oid, "tid": "00000000-0000-0000-0000-000000000000",
		"iat": now.Unix(), "nbf": now.Unix(), "exp": now.Add(time.Hour).Unix(),
	}
	if c.edit != nil {
		c.edit(claims)
	}
	tok, err := c.issuer.Mint(claims)
	if err != nil {
		return azcore.AccessToken{}, err
	}
	exp := now.Add(time.Hour)
	if e, ok := claims["exp"].(int64); ok {
		exp = time.Unix(e, 0)
	}
	return azcore.AccessToken{Token: tok, ExpiresOn: exp}, nil
}

// PrivateKeyPEM is the issuer's signing key (PKCS #8, PEM), for clients in
// other languages that mint its tokens themselves.
func (i *Issuer) PrivateKeyPEM() []byte {
	der, err := x509.MarshalPKCS8PrivateKey(i.key)
	if err != nil {
		panic(err) // an RSA key always marshals
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
}
