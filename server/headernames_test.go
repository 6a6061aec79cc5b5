package server

import (
	"net/textproto"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// headerNameUse finds the header names the server's code spells out when
// it reads or writes a header: Header.Get/Set/Values/Del/Add("name"),
// header(h, "name") and headerBool(h, "name"), and the maps indexed
// directly: Header()["name"], h["name"], r.Header["name"].
var headerNameUse = regexp.MustCompile(`(?:Header(?:\(\))?\.(?:Get|Set|Values|Del|Add)\(|\bh\.(?:Get|Set|Values|Del|Add)\(|\bheader(?:Bool)?\((?:[^,()]|\(\))+,\s*|(?:Header\(\)|\bh|\br\.Header)\[)"([^"]+)"`)

// Every header name the server spells out is in its canonical form: a
// name in another spelling is canonicalized again, into a new string, on
// every call of every request (net/http's Header methods copy it).
func TestHeaderNamesInTheServerAreSpelledCanonically(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range headerNameUse.FindAllSubmatch(src, -1) {
			seen++
			name := string(m[1])
			if canon := textproto.CanonicalMIMEHeaderKey(name); canon != name {
				t.Errorf("%s: header %q is spelled %q canonically", f, name, canon)
			}
		}
	}
	if seen < 50 {
		t.Fatalf("found only %d header names: the pattern no longer matches the code", seen)
	}
}
