package httpapi

import (
	"embed"
	"io/fs"
	"net/http"
)

//go:embed web
var web embed.FS

func dashboard() http.Handler {
	sub, _ := fs.Sub(web, "web")
	return http.FileServer(http.FS(sub))
}
