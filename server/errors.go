package server

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/orrery-db/orrery/engine"
)

// gatewayVersion names Orrery in error messages where the service names its build.
const gatewayVersion = "Orrery/1.0"

// errorBody is the JSON body of every error response, as the service writes it.
type errorBody struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	// AdditionalErrorInfo is a JSON document in a string, as the service
	// sends it (see engine.Error).
	AdditionalErrorInfo string `json:"additionalErrorInfo,omitempty"`
}

// writeError maps any error to its HTTP status and Cosmos error body. It is
// the one place engine errors become HTTP.
func writeError(w http.ResponseWriter, r *http.Request, err error) {
	e, ok := engine.AsError(err)
	if !ok {
		slog.Error("internal error", "method", r.Method, "path", r.URL.Path, "error", err)
		e = &engine.Error{Status: 500, Code: "InternalServerError", Message: "An unexpected error occurred while processing the request."}
	}
	writeCosmosError(w, activityID(w), e)
}

var (
	zeroCharge        = []string{"0"}
	defaultRetryAfter = []string{"100"}
)

func writeCosmosError(w http.ResponseWriter, activity string, e *engine.Error) {
	// Canonical keys set directly, constant values shared (net/http copies
	// the map's values before writing them): a 404, 409 or 412 is an
	// answer the SDKs get in the ordinary course.
	h := w.Header()
	h["Content-Type"] = jsonContentType
	if e.SubStatus != 0 {
		h["X-Ms-Substatus"] = []string{strconv.Itoa(e.SubStatus)}
	}
	if e.Status == http.StatusTooManyRequests && header(h, "X-Ms-Retry-After-Ms") == "" {
		h["X-Ms-Retry-After-Ms"] = defaultRetryAfter
	}
	if header(h, "X-Ms-Request-Charge") == "" {
		h["X-Ms-Request-Charge"] = zeroCharge
	}
	code := e.Code
	if code == "" {
		code = http.StatusText(e.Status)
	}
	body, _ := json.Marshal(errorBody{
		Code:                code,
		Message:             e.Message + "\r\nActivityId: " + activity + ", " + gatewayVersion,
		AdditionalErrorInfo: e.AdditionalErrorInfo,
	})
	w.WriteHeader(e.Status)
	w.Write(body)
}

// activityID is the activity id this response carries.
func activityID(w http.ResponseWriter) string { return header(w.Header(), "X-Ms-Activity-Id") }

func badRequest(format string, args ...any) error { return engine.BadRequest(format, args...) }
