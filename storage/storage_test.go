package storage

import (
	"bytes"
	"testing"
)

func TestPrefixEnd(t *testing.T) {
	tests := []struct {
		name   string
		prefix []byte
		want   []byte
	}{
		{"empty prefix has no end", nil, nil},
		{"plain byte is incremented", []byte("ab"), []byte("ac")},
		{"trailing 0xff is dropped", []byte{'a', 0xff}, []byte{'b'}},
		{"several trailing 0xff are dropped", []byte{'a', 0xff, 0xff}, []byte{'b'}},
		{"all 0xff has no end", []byte{0xff, 0xff}, nil},
		{"zero byte", []byte{0}, []byte{1}},
		{"inner 0xff is kept", []byte{0xff, 'a'}, []byte{0xff, 'b'}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := append([]byte(nil), tt.prefix...)
			got := PrefixEnd(in)
			if !bytes.Equal(got, tt.want) || (got == nil) != (tt.want == nil) {
				t.Fatalf("PrefixEnd(%q) = %q, want %q", tt.prefix, got, tt.want)
			}
			if !bytes.Equal(in, tt.prefix) {
				t.Fatalf("PrefixEnd modified its argument: %q, was %q", in, tt.prefix)
			}
		})
	}
}
