package query

import "fmt"

// Error codes carried by *Error. SC1001, SC2001 and SC2005 are the codes the
// service reports for those errors; the others are this package's own
// choices within the same families.
const (
	// CodeSyntax marks a syntax error (the service's SC1001).
	CodeSyntax = "SC1001"
	// CodeUnresolved marks an identifier that is bound by no FROM alias (SC2001).
	CodeUnresolved = "SC2001"
	// CodeUnknownFunction marks a call of a function that does not exist (SC2005).
	CodeUnknownFunction = "SC2005"
	// CodeArity marks a call with the wrong number of arguments.
	CodeArity = "SC2050"
	// CodeSemantic marks any other invalid query.
	CodeSemantic = "SC2000"
	// CodeRuntime marks an error raised while executing a valid query, such
	// as a TOP parameter that is not a count.
	CodeRuntime = "SC3000"
)

// Error is the error returned for an invalid query or a failed execution.
// Start and End are byte offsets into the query text (End exclusive); both are
// zero for errors that have no position, such as a bad parameter value.
type Error struct {
	Code    string
	Message string
	Start   int
	End     int
}

// Error returns the message in the service's wording followed, when the
// error has a location, by its byte offsets in the query text. Use Message
// (or JSON) for the bare service text.
func (e *Error) Error() string {
	if e.Start == 0 && e.End == 0 {
		return e.Message
	}
	return fmt.Sprintf("%s (at offset %d-%d)", e.Message, e.Start, e.End)
}

func syntaxErrorAt(t token) *Error {
	if t.kind == tEOF {
		return &Error{Code: CodeSyntax, Message: "Syntax error, unexpected end-of-file.", Start: t.pos, End: t.pos}
	}
	return &Error{Code: CodeSyntax, Message: fmt.Sprintf("Syntax error, incorrect syntax near '%s'.", t.text), Start: t.pos, End: t.pos + len(t.text)}
}

func semanticError(code string, start, end int, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...), Start: start, End: end}
}

func runtimeError(format string, args ...any) *Error {
	return &Error{Code: CodeRuntime, Message: fmt.Sprintf(format, args...)}
}

// JSON renders the error the way the service reports query errors inside
// its 400 response message: {"errors":[{"severity":"Error","location":
// {"start":s,"end":e},"code":"SC1001","message":"..."}]}.
func (e *Error) JSON() []byte {
	b := []byte(`{"errors":[{"severity":"Error",`)
	if e.Start != 0 || e.End != 0 {
		b = fmt.Appendf(b, `"location":{"start":%d,"end":%d},`, e.Start, e.End)
	}
	b = append(b, `"code":`...)
	b = appendString(b, e.Code)
	b = append(b, `,"message":`...)
	b = appendString(b, e.Message)
	return append(b, "}]}"...)
}
