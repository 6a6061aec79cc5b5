package server

import "testing"

func TestEncodeURIComponent(t *testing.T) {
	tests := []struct{ in, want string }{
		{"The value of x is 1.", "The%20value%20of%20x%20is%201."},
		{"a+b=c&d/e?f#g", "a%2Bb%3Dc%26d%2Fe%3Ff%23g"},
		{"-_.!~*'()", "-_.!~*'()"},
		{"line 1\nline 2", "line%201%0Aline%202"},
		{"café 😀", "caf%C3%A9%20%F0%9F%98%80"},
		{"100%", "100%25"},
		{"", ""},
	}
	for _, tc := range tests {
		if got := encodeURIComponent(tc.in); got != tc.want {
			t.Errorf("encodeURIComponent(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
