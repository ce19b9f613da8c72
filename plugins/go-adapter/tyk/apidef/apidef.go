// Package apidef is a local stand-in for Tyk's apidef package: the API
// definition a Go plugin reads through ctx.GetDefinition.
//
// Only the fields this gateway knows are filled in; Tyk's struct has
// hundreds more, which a plugin here cannot use (it would not compile,
// rather than read a silent zero).
package apidef

// APIDefinition is the API the request is for.
type APIDefinition struct {
	// APIID is the definition's api_id.
	APIID string `json:"api_id"`
	// ConfigData is the definition's config_data object (nil when absent).
	ConfigData map[string]interface{} `json:"config_data"`
}
