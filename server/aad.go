package server

import (
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/orrery-db/orrery/engine"
)

// Microsoft Entra ID (AAD) tokens arrive as "type=aad&ver=1.0&sig=<JWT>".
// Whatever the mode, a principal acts as the service's built-in data-plane
// roles allow: it reads metadata (the account, databases, containers,
// scripts, partition key ranges, offers), reads, queries and reads feeds
// with Data Reader, and also writes items and runs stored procedures with
// Data Contributor. Managing databases, containers, scripts, offers, users
// and permissions is refused with 403, as the service refuses it to every
// Entra principal (that goes through Azure Resource Manager there).

// AADMode says which Entra ID tokens the server accepts.
type AADMode int

const (
	// AADAuto is AADEmulator while the master key is the emulator's
	// well-known key, AADOff otherwise (or AADVerify when keys are given).
	AADAuto AADMode = iota
	// AADOff refuses every Entra ID token (401).
	AADOff
	// AADEmulator accepts any well-formed, unexpired JWT, as the official
	// emulator does, and its principal acts as a Data Contributor on the
	// whole account.
	AADEmulator
	// AADVerify verifies the token's RS256 signature against configured
	// keys, its audience, issuer and validity period, and grants its
	// principal (oid) the roles assigned to it.
	AADVerify
)

// ParseAADMode parses "off", "emulator" or "verify" ("" is AADAuto).
func ParseAADMode(s string) (AADMode, error) {
	switch strings.ToLower(s) {
	case "", "auto":
		return AADAuto, nil
	case "off":
		return AADOff, nil
	case "emulator":
		return AADEmulator, nil
	case "verify":
		return AADVerify, nil
	}
	return AADAuto, fmt.Errorf("unknown Entra ID mode %q: off, emulator or verify", s)
}

// AAD configures Entra ID (AAD) authentication.
type AAD struct {
	Mode AADMode
	// Keys verify token signatures (AADVerify), by key id (kid); a token
	// without a kid may match any of them.
	Keys map[string]*rsa.PublicKey
	// Issuers, when not empty, are the accepted values of the iss claim.
	Issuers []string
	// Audiences are accepted values of the aud claim besides
	// https://cosmos.azure.com. When empty, the scheme and host the request
	// was addressed to, with or without its port (https://localhost or
	// https://localhost:8081 for https://localhost:8081/), are accepted,
	// which is what the SDKs ask their credentials for.
	Audiences []string
	// Roles assign the built-in data-plane roles to principals (AADVerify).
	Roles []RoleAssignment
	// Leeway is the clock skew allowed on exp and nbf; 2 minutes when zero.
	Leeway time.Duration
}

// Built-in data-plane role definitions, by the service's ids.
const (
	// DataReaderRole is "Cosmos DB Built-in Data Reader".
	DataReaderRole = "00000000-0000-0000-0000-000000000001"
	// DataContributorRole is "Cosmos DB Built-in Data Contributor".
	DataContributorRole = "00000000-0000-0000-0000-000000000002"
)

// RoleAssignment gives a principal a built-in role over a scope: "/" (the
// account), "/dbs/{db}" or "/dbs/{db}/colls/{container}".
type RoleAssignment struct {
	// PrincipalID is the token's oid claim.
	PrincipalID string `json:"principalId"`
	// RoleDefinitionID is DataReaderRole or DataContributorRole; the names
	// "Cosmos DB Built-in Data Reader"/"…Data Contributor" (or "reader",
	// "contributor") are accepted too.
	RoleDefinitionID string `json:"roleDefinitionId"`
	// Scope is the resource the role covers, with everything below it.
	Scope string `json:"scope"`

	contributor bool
	scope       []string
}

// LoadRoleAssignments reads a role file: {"roleAssignments": [{"principalId",
// "roleDefinitionId", "scope"}, …]}.
func LoadRoleAssignments(path string) ([]RoleAssignment, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var f struct {
		RoleAssignments []RoleAssignment `json:"roleAssignments"`
	}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	for i := range f.RoleAssignments {
		if err := f.RoleAssignments[i].compile(); err != nil {
			return nil, fmt.Errorf("%s: role assignment %d: %w", path, i, err)
		}
	}
	return f.RoleAssignments, nil
}

func (a *RoleAssignment) compile() error {
	if a.PrincipalID == "" {
		return errors.New("no principalId")
	}
	switch strings.ToLower(strings.TrimSpace(a.RoleDefinitionID)) {
	case DataReaderRole, "cosmos db built-in data reader", "reader", "data reader":
		a.contributor = false
	case DataContributorRole, "cosmos db built-in data contributor", "contributor", "data contributor":
		a.contributor = true
	default:
		return fmt.Errorf("roleDefinitionId %q is neither the Data Reader (%s) nor the Data Contributor (%s) role", a.RoleDefinitionID, DataReaderRole, DataContributorRole)
	}
	segs := splitPath(a.Scope)
	switch {
	case a.Scope == "" || !strings.HasPrefix(a.Scope, "/"):
		return fmt.Errorf("scope %q must be \"/\", \"/dbs/{db}\" or \"/dbs/{db}/colls/{container}\"", a.Scope)
	case len(segs) == 0:
	case (len(segs) == 2 && segs[0] == "dbs") || (len(segs) == 4 && segs[0] == "dbs" && segs[2] == "colls"):
	default:
		return fmt.Errorf("scope %q must be \"/\", \"/dbs/{db}\" or \"/dbs/{db}/colls/{container}\"", a.Scope)
	}
	a.scope = segs
	return nil
}

// LoadJWKS reads the RSA public keys of a JSON Web Key Set file
// ({"keys": [{"kty": "RSA", "kid", "n", "e"}, …]}, as an identity
// provider publishes at its jwks_uri).
func LoadJWKS(path string) (map[string]*rsa.PublicKey, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var set struct {
		Keys []struct {
			Kty string `json:"kty"`
			Kid string `json:"kid"`
			Use string `json:"use"`
			N   string `json:"n"`
			E   string `json:"e"`
		} `json:"keys"`
	}
	if err := json.Unmarshal(b, &set); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	keys := map[string]*rsa.PublicKey{}
	for i, k := range set.Keys {
		if k.Kty != "RSA" || (k.Use != "" && k.Use != "sig") {
			continue
		}
		n, err1 := base64.RawURLEncoding.DecodeString(strings.TrimRight(k.N, "="))
		e, err2 := base64.RawURLEncoding.DecodeString(strings.TrimRight(k.E, "="))
		if err1 != nil || err2 != nil || len(n) == 0 || len(e) == 0 || len(e) > 4 {
			return nil, fmt.Errorf("%s: key %d is not a valid RSA key", path, i)
		}
		exp := int(new(big.Int).SetBytes(e).Int64())
		keys[k.Kid] = &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: exp}
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("%s: no RSA signing key", path)
	}
	return keys, nil
}

// cosmosAudience is the audience every account accepts.
const cosmosAudience = "https://cosmos.azure.com"

// defaultAADLeeway is the clock skew allowed on exp and nbf.
const defaultAADLeeway = 2 * time.Minute

// aadVerifier checks Entra ID tokens.
type aadVerifier struct {
	cfg   AAD
	roles map[string][]RoleAssignment // by principal
}

func newAADVerifier(cfg AAD, masterKey string) (*aadVerifier, error) {
	if cfg.Mode == AADAuto {
		switch {
		case len(cfg.Keys) > 0:
			cfg.Mode = AADVerify
		case masterKey == EmulatorKey:
			cfg.Mode = AADEmulator
		default:
			cfg.Mode = AADOff
		}
	}
	if cfg.Mode == AADVerify && len(cfg.Keys) == 0 {
		return nil, errors.New("server: verifying Entra ID tokens needs the identity provider's public keys (a JWKS file)")
	}
	if cfg.Leeway == 0 {
		cfg.Leeway = defaultAADLeeway
	}
	v := &aadVerifier{cfg: cfg, roles: map[string][]RoleAssignment{}}
	for _, a := range cfg.Roles {
		if err := a.compile(); err != nil {
			return nil, fmt.Errorf("server: %w", err)
		}
		v.roles[a.PrincipalID] = append(v.roles[a.PrincipalID], a)
	}
	return v, nil
}

// aadPrincipal is an authenticated Entra ID identity.
type aadPrincipal struct {
	oid string
	// all: the emulator's mode, a Data Contributor on the whole account.
	all bool
}

// aadClaims are the claims Orrery reads.
type aadClaims struct {
	jwt.RegisteredClaims
	OID string `json:"oid"`
}

// verify checks a JWT as the mode says and returns its principal.
func (v *aadVerifier) verify(r *http.Request, token string, now time.Time) (*aadPrincipal, *engine.Error) {
	if v.cfg.Mode == AADOff {
		return nil, unauthorized("Entra ID (AAD) tokens are not accepted by this server: sign requests with the account's key, or start the server with --aad=emulator or --aad-jwks.")
	}
	var claims aadClaims
	timeOpts := []jwt.ParserOption{jwt.WithLeeway(v.cfg.Leeway), jwt.WithTimeFunc(func() time.Time { return now }), jwt.WithExpirationRequired()}
	if v.cfg.Mode == AADEmulator {
		if _, _, err := jwt.NewParser().ParseUnverified(token, &claims); err != nil {
			return nil, unauthorized(fmt.Sprintf("The Entra ID (AAD) token is malformed: %v.", err))
		}
		if err := jwt.NewValidator(timeOpts...).Validate(claims); err != nil {
			return nil, unauthorized(fmt.Sprintf("The Entra ID (AAD) token is not valid: %v.", err))
		}
		return &aadPrincipal{oid: claims.OID, all: true}, nil
	}
	opts := append(timeOpts, jwt.WithValidMethods([]string{"RS256"}))
	parsed, err := jwt.NewParser(opts...).ParseWithClaims(token, &claims, func(t *jwt.Token) (any, error) {
		kid, _ := t.Header["kid"].(string)
		if k, ok := v.cfg.Keys[kid]; ok {
			return k, nil
		}
		if kid == "" && len(v.cfg.Keys) == 1 {
			for _, k := range v.cfg.Keys {
				return k, nil
			}
		}
		return nil, fmt.Errorf("no key %q among the configured signing keys", kid)
	})
	if err != nil || !parsed.Valid {
		return nil, unauthorized(fmt.Sprintf("The Entra ID (AAD) token is not valid: %v.", err))
	}
	if !v.audienceOK(r, claims.Audience) {
		return nil, unauthorized(fmt.Sprintf("The Entra ID (AAD) token's audience %q is not this account: request a token for %s://%s/.default or %s/.default.",
			[]string(claims.Audience), requestScheme(r), requestHost(r), cosmosAudience))
	}
	if len(v.cfg.Issuers) > 0 && !contains(v.cfg.Issuers, claims.Issuer) {
		return nil, unauthorized(fmt.Sprintf("The Entra ID (AAD) token's issuer %q is not trusted by this account.", claims.Issuer))
	}
	if claims.OID == "" {
		return nil, unauthorized("The Entra ID (AAD) token has no oid claim: the principal cannot be identified.")
	}
	return &aadPrincipal{oid: claims.OID}, nil
}

func (v *aadVerifier) audienceOK(r *http.Request, auds jwt.ClaimStrings) bool {
	want := append([]string{cosmosAudience}, v.cfg.Audiences...)
	if len(v.cfg.Audiences) == 0 {
		// The Go SDK asks for scheme://host, the JavaScript SDK for
		// scheme://host:port.
		host, hostPort := requestHost(r), strings.ToLower(r.Host)
		want = append(want, "https://"+host, "http://"+host, "https://"+hostPort, "http://"+hostPort)
	}
	for _, a := range auds {
		if contains(want, strings.TrimSuffix(a, "/")) {
			return true
		}
	}
	return false
}

func requestHost(r *http.Request) string {
	h := r.Host
	if hn, _, err := net.SplitHostPort(h); err == nil {
		h = hn
	}
	return strings.ToLower(strings.Trim(h, "[]"))
}

func requestScheme(r *http.Request) string {
	if r.TLS != nil {
		return "https"
	}
	return "http"
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// rbacAction names the service's data-plane action an operation needs, for
// the 403 message.
func rbacAction(op operation, rt route) string {
	const base = "Microsoft.DocumentDB/databaseAccounts/"
	switch op.kind {
	case "dbs":
		return base + "sqlDatabases/write"
	case "colls":
		return base + "sqlDatabases/containers/write"
	case "sprocs", "triggers", "udfs":
		if op.verb == "execute" {
			return base + "sqlDatabases/containers/executeStoredProcedure"
		}
		return base + "sqlDatabases/containers/" + map[string]string{"sprocs": "storedProcedures", "triggers": "triggers", "udfs": "userDefinedFunctions"}[op.kind] + "/write"
	case "docs":
		if rt.need == needRead {
			return base + "sqlDatabases/containers/items/read"
		}
		return base + "sqlDatabases/containers/items/*"
	case "users", "permissions":
		return base + "sqlDatabases/users/write"
	case "clientencryptionkeys":
		return base + "sqlDatabases/clientEncryptionKeys/write"
	case "offers":
		return base + "throughputSettings/write"
	}
	return base + "readMetadata"
}

// authorizeAAD decides what an Entra ID principal may do: metadata reads,
// then data operations by the roles it holds over the target.
func (s *Server) authorizeAAD(r *request, rt route, p *aadPrincipal) (grant, *engine.Error) {
	ctx := r.Context()
	deny := func(sub int) (grant, *engine.Error) {
		return grant{}, &engine.Error{Status: http.StatusForbidden, SubStatus: sub, Code: "Forbidden", Message: fmt.Sprintf(
			"Request blocked by Auth orrery : Request is blocked because principal [%s] does not have required RBAC permissions to perform action [%s] on resource [/%s]. Learn more: https://aka.ms/cosmos-native-rbac.",
			p.oid, rbacAction(r.op, rt), strings.Join(r.segs, "/"))}
	}
	data := r.op.kind == "docs" || (r.op.kind == "sprocs" && r.op.verb == "execute")
	if !data {
		// Metadata: reads of the account's resources, never their
		// management, nor users and permissions (keys only).
		if rt.need != needRead || r.op.kind == "users" || r.op.kind == "permissions" {
			return deny(5300)
		}
		if p.all || rt.reach == reachAccount || rt.reach == reachKeys {
			if p.all || len(s.aad.roles[p.oid]) > 0 {
				return grant{}, nil
			}
			return deny(5301)
		}
		req := s.eng.ResolveLink(ctx, r.segs)
		for _, a := range s.aad.roles[p.oid] {
			scope := s.eng.ResolveLink(ctx, a.scope)
			if rt.reach == reachDatabaseAny && len(scope) > 2 {
				// A role anywhere in a database reads what any credential
				// of the database reads.
				scope = scope[:2]
			}
			// A role over a container reads the database above it too.
			if linkCovers(scope, req) || linkCovers(req, scope) {
				return grant{}, nil
			}
		}
		return deny(5301)
	}
	if p.all {
		return grant{write: true}, nil
	}
	g, found := grant{}, false
	req := s.eng.ResolveLink(ctx, r.segs)
	for _, a := range s.aad.roles[p.oid] {
		if linkCovers(s.eng.ResolveLink(ctx, a.scope), req) {
			found = true
			g.write = g.write || a.contributor
		}
	}
	if !found || (rt.need == needWrite && !g.write) {
		return deny(5302)
	}
	return g, nil
}
