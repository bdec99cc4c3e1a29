package codec

// This file holds the codec server the Temporal Web UI calls from the
// browser: /decode to show payloads, /encode to send a signal's input
// encrypted (the SDK's handler for both), behind CORS for the UI's origins
// and an optional Authorization check.

import (
	"crypto/subtle"
	"net/http"
	"slices"
	"strings"

	"go.temporal.io/sdk/converter"
)

// ServerOptions say whom the codec server answers.
type ServerOptions struct {
	// Origins are the Web UI's origins (scheme://host:port) allowed to call
	// from a browser; a request with another Origin is refused.
	Origins []string
	// Authorization, when set, is the exact Authorization header every
	// request must carry (e.g. "Bearer <token>"; the temporal CLI sends it
	// with --codec-auth, a proxy in front of the UI can add it).
	Authorization string
}

// maxBody bounds a request: the UI sends a history's payloads.
const maxBody = 16 << 20

// Handler serves POST .../decode and POST .../encode with c, both under
// the same origin and Authorization rules. Encoding grants nothing: what a
// node acts on is the operator's signed intent inside the input, which the
// codec server neither makes nor checks (docs/access.md).
func Handler(c *Codec, o ServerOptions) http.Handler {
	codec := converter.NewPayloadCodecHTTPHandler(c)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		origin := r.Header.Get("Origin")
		if origin != "" {
			if !slices.Contains(o.Origins, origin) {
				http.Error(w, "origin "+origin+" is not one the codec server answers (--ui-origin)", http.StatusForbidden)
				return
			}
			h := w.Header()
			h.Set("Access-Control-Allow-Origin", origin)
			h.Set("Access-Control-Allow-Credentials", "true")
			h.Set("Access-Control-Allow-Methods", "POST, OPTIONS")
			h.Set("Access-Control-Allow-Headers", "Content-Type, X-Namespace, Authorization")
			h.Set("Access-Control-Max-Age", "600")
			h.Add("Vary", "Origin")
		}
		if r.Method == http.MethodOptions {
			w.WriteHeader(http.StatusNoContent) // a preflight carries no credentials
			return
		}
		if o.Authorization != "" && subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), []byte(o.Authorization)) != 1 {
			w.Header().Set("WWW-Authenticate", "Bearer")
			http.Error(w, "the codec server needs the configured Authorization header", http.StatusUnauthorized)
			return
		}
		if r.Method != http.MethodPost || !(strings.HasSuffix(r.URL.Path, "/decode") || strings.HasSuffix(r.URL.Path, "/encode")) {
			http.Error(w, "the codec server answers POST /decode and POST /encode only", http.StatusNotFound)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxBody)
		codec.ServeHTTP(w, r)
	})
}
