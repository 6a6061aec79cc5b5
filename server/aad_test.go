package server

import (
	"crypto/rand"
	"crypto/rsa"
	"fmt"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// aadTestKey signs the Entra ID tokens of the tests in this package.
var aadTestKey = func() *rsa.PrivateKey {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err)
	}
	return k
}()

func mintAAD(t testing.TB, oid string) string {
	t.Helper()
	now := time.Now()
	tok := jwt.NewWithClaims(jwt.SigningMethodRS256, jwt.MapClaims{
		"aud": "https://cosmos.azure.com", "iss": "https://issuer.test/", "oid": oid,
		"nbf": now.Unix(), "exp": now.Add(time.Hour).Unix(),
	})
	tok.Header["kid"] = "k"
	s, err := tok.SignedString(aadTestKey)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// withAAD makes the fixture verify tokens of aadTestKey: "writer" is a Data
// Contributor on the account, "reader" a Data Reader on container c.
func (f *authzFixture) withAAD() *authzFixture {
	f.t.Helper()
	v, err := newAADVerifier(AAD{
		Mode: AADVerify, Keys: map[string]*rsa.PublicKey{"k": &aadTestKey.PublicKey}, Issuers: []string{"https://issuer.test/"},
		Roles: []RoleAssignment{
			{PrincipalID: "writer", RoleDefinitionID: DataContributorRole, Scope: "/"},
			{PrincipalID: "reader", RoleDefinitionID: DataReaderRole, Scope: "/dbs/db/colls/c"},
		},
	}, EmulatorKey)
	if err != nil {
		f.t.Fatal(err)
	}
	f.srv.aad = v
	f.tokens["aad writer"] = "type=aad&ver=1.0&sig=" + mintAAD(f.t, "writer")
	f.tokens["aad reader"] = "type=aad&ver=1.0&sig=" + mintAAD(f.t, "reader")
	return f
}

// TestAADOverEveryOperation sends every row of the route x credential
// matrix with an Entra ID Data Contributor on the account and a Data
// Reader on container c: data operations answer as they do to the master
// key (the contributor) or to a Read token on c (the reader), metadata
// reads are served, and managing databases, containers, scripts, offers,
// users and permissions is a 403 that changes nothing.
func TestAADOverEveryOperation(t *testing.T) {
	for _, row := range authzMatrix() {
		req := httptest.NewRequest(row.method, "http://orrery"+row.path, nil)
		for k, v := range row.headers {
			req.Header.Set(k, v)
		}
		op, _, err := classify(req, splitPath(req.URL.Path))
		if err != nil {
			t.Fatal(err)
		}
		rt := operations[op]
		data := op.kind == "docs" || (op.kind == "sprocs" && op.verb == "execute")
		metadata := !data && rt.need == needRead && op.kind != "users"
		t.Run(fmt.Sprintf("%s/%s_%s", op, row.method, row.path), func(t *testing.T) {
			for _, who := range []string{"aad writer", "aad reader"} {
				want := 403
				switch {
				case data && who == "aad writer":
					want = row.status
				case data:
					want, _ = row.want(credRead)
				case metadata && (who == "aad writer" || !strings.Contains(row.path, "/other")):
					want = row.status
				}
				mutates := want < 300 && row.method != "GET" && !(op.verb == "query" || op.verb == "queryplan")
				f := newAuthzFixture(t).withAAD()
				before := f.snapshot()
				rec := f.do(who, row.method, row.path, row.body, row.headers)
				if rec.Code != want {
					t.Errorf("%s: status %d, want %d: %s", who, rec.Code, want, rec.Body)
					continue
				}
				// Batch and bulk check each operation's type (server/batch.go).
				if want == 403 && rt.need != needPerOperation && !strings.Contains(rec.Body.String(), "does not have required RBAC permissions") {
					t.Errorf("%s: 403 without the service's message: %s", who, rec.Body)
				}
				if !mutates && !reflect.DeepEqual(before, f.snapshot()) {
					t.Errorf("%s (%d) changed data", who, rec.Code)
				}
			}
		})
	}
}
