package main

import (
	"net/http"
)

// AddHeader adds a custom header to every request.
func AddHeader(rw http.ResponseWriter, r *http.Request) {
	r.Header.Set("X-Custom-GoPlugin", "hello-from-go-plugin")
}

func main() {}