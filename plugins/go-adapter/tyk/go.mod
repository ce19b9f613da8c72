// A local stand-in for the parts of Tyk's Go module a Go plugin imports, so
// a plugin written for Tyk builds here unchanged and without Tyk's source:
// build.sh points the plugin's module at this directory with a `replace`.
module github.com/TykTechnologies/tyk

go 1.19
