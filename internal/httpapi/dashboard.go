package httpapi

import (
	"embed"
	"io/fs"
	"net/http"
	"path"
	"strings"
)

//go:embed web
var web embed.FS

// dashboard serves the page's static files. They hold no data (the page
// reads the JSON API with the key it asks for), so they need no
// credentials.
func dashboard() http.Handler {
	sub, _ := fs.Sub(web, "web")
	files := http.FileServer(http.FS(sub))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// A name an fs.FS cannot hold (invalid UTF-8, ...) is not there;
		// http.FS would answer 500.
		name := strings.TrimPrefix(path.Clean("/"+r.URL.Path), "/")
		if name != "" && !fs.ValidPath(name) {
			http.NotFound(w, r)
			return
		}
		files.ServeHTTP(w, r)
	})
}
