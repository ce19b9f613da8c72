// Package ctx is a local stand-in for Tyk's ctx package
// (github.com/TykTechnologies/tyk/ctx) with the calls that make sense in
// this gateway:
//
//   - GetDefinition(r): the API's api_id and config_data.
//   - SetDefinition(r, def): replaces what GetDefinition returns for r.
//
// Tyk's other calls (GetSession, SetSession, GetAuthToken,
// GetOASDefinition, ...) are
// absent on purpose: a plugin using them fails to build with Go's own
// "undefined: ctx.X" error instead of running with made-up data.
package ctx

import (
	"context"
	"net/http"

	"github.com/TykTechnologies/tyk/apidef"
)

// Key is the type of the context keys Tyk's ctx package uses.
type Key uint

// Definition is the context key of the API definition, as in Tyk.
const Definition Key = 8

// GetDefinition returns the API definition of the request's API, or nil
// when the request did not come through the gateway.
func GetDefinition(r *http.Request) *apidef.APIDefinition {
	if v := r.Context().Value(Definition); v != nil {
		if d, ok := v.(*apidef.APIDefinition); ok {
			return d
		}
	}
	return nil
}

// SetDefinition makes GetDefinition(r) return s, changing r in place as
// Tyk does.
func SetDefinition(r *http.Request, s *apidef.APIDefinition) {
	*r = *r.WithContext(context.WithValue(r.Context(), Definition, s))
}
