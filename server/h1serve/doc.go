// Package h1serve serves HTTP/1.1 (and 1.0) on a listener with net/http's
// semantics and less of its per-request work: the API port's server.
//
// A request's head is parsed here when the whole head is buffered, plain
// (CRLF lines, no folding, printable ASCII, origin form, HTTP/1.1) and
// valid, with nothing in it that net/http rewrites (no Transfer-Encoding,
// no Pragma, no second Host or Content-Length line, a path url.URL keeps as
// it is): the request made is the one http.ReadRequest would make (the
// method, target and values substrings of one string, the keys interned),
// its body the Content-Length's bytes read as net/http's body reads them.
// Any other head (an invalid one included) is read by http.ReadRequest,
// the code net/http's server parses with, so that the framing rules that
// keep requests from being smuggled (Content-Length and Transfer-Encoding
// checked, both refused together, chunked bodies decoded, unsupported
// transfer codings answered 501) and every error are net/http's own; the
// header lines the Cosmos DB SDKs send and the Host line are still taken
// out of such a head first where it is buffered and plain (head.go says
// why and how). Around it, the server
// does what net/http's conn.serve does, in the same order and with the
// same answers:
//
//   - the headers limited to MaxHeaderBytes+4096 bytes (1 MiB + 4 KiB by
//     default), a request over it answered 431 and the connection closed;
//   - 400 for a missing (HTTP/1.1) or malformed Host header and for header
//     names and values net/http refuses, 505 for HTTP/2+ request lines,
//     with net/http's plain-text bodies;
//   - Expect: 100-continue (the 100 written on the body's first read, the
//     connection closed when the body was not read), 417 for other
//     expectations;
//   - "OPTIONS *" answered by the server itself (an empty 200), as
//     net/http's general OPTIONS handler;
//   - pipelined requests answered in order; HTTP/1.0 and keep-alive,
//     Connection: close from the client or the handler;
//   - a body the handler left unread drained up to 256 KiB before the
//     answer, the connection closed beyond;
//   - ReadHeaderTimeout, ReadTimeout, WriteTimeout and IdleTimeout set on
//     the connection where net/http sets them; the TLS handshake under the
//     shortest of them;
//   - the answer framed as net/http frames it: Content-Length for a body
//     within 2 KiB written by a handler that has returned, chunked beyond
//     (HTTP/1.1) or the connection closed (HTTP/1.0); no body for HEAD,
//     1xx, 204 and 304; Date added; Content-Type sniffed when the handler
//     set none; header values' CR and LF turned to spaces; trailers;
//   - the header as the handler had it at WriteHeader (later changes are
//     not sent);
//   - ConnState hooks (New, Active, Idle, Hijacked, Closed) and
//     ConnContext, BaseContext, http.ServerContextKey and
//     http.LocalAddrContextKey in the requests' contexts; RemoteAddr and
//     the connection's TLS state on each request;
//   - Hijack, Flush, and http.ResponseController's FlushError,
//     SetReadDeadline, SetWriteDeadline and EnableFullDuplex;
//   - a handler's panic logged with its stack (http.ErrAbortHandler
//     silently) and its connection closed;
//   - Shutdown closes the listeners and the idle connections and waits
//     for the active ones, which answer with Connection: close; Close
//     closes everything at once.
//
// What differs from net/http, on purpose:
//
//   - The request's context is cancelled when the client goes away only
//     once its handler has run watchDelay (5 ms) and read its body:
//     net/http starts a background read on the connection for every
//     request; here a timer per connection, reset per request, starts it
//     for the handlers still running at watchDelay. A client that leaves
//     is noticed up to that much later; a short request costs no goroutine,
//     no extra read(2) and no wake-up.
//   - The handler's header map is one per connection, emptied when its
//     answer is written (so that an idle connection keeps none of its
//     values, which may point into a request's body); a handler must not
//     use it after returning (net/http gives a fresh one per request).
//   - The header is kept at WriteHeader by writing it out then (Header is
//     not cloned), so a handler's later change to it is not sent, as with
//     net/http; but a value of Content-Length, Content-Type, Connection or
//     Transfer-Encoding changed in place (h[k][0] = v) after WriteHeader
//     is.
//   - A body the handler closed with an Expect: 100-continue still pending
//     is not read: the connection closes after the answer (net/http reads
//     up to 256 KiB of it first).
//   - http.MaxBytesReader cannot ask this server to close the connection
//     once its limit is hit (net/http's hook for it is unexported): the
//     rest of the body is read up to 256 KiB, as any body left unread, and
//     the connection closed beyond.
//   - The log lines for misuse (superfluous WriteHeader, Write on a
//     hijacked connection) do not name the caller.
//   - CloseNotifier is not implemented (deprecated; nothing here uses it);
//     nor HTTP/2 (New refuses a TLSNextProto, a TLSConfig and Protocols).
//
// Much of this package follows the structure and code of Go's net/http
// server (server.go, Go 1.26): the connection's reader, its background
// read, the response's framing. That code is Copyright 2009 The Go Authors
// and used under its BSD-style license, reproduced in LICENSE-Go beside
// this file.
package h1serve
