package web

import (
	"html/template"
	"strings"
)

// pageNames are the pages, each parsed with the layout; inboxlist is the
// inbox's list alone (live updates fetch it).
var pageNames = map[string]string{"signin": "signin", "inbox": "inbox", "inboxlist": "inbox", "ask": "ask", "runs": "runs", "run": "run", "error": "error"}

func parsePages() (map[string]*template.Template, error) {
	funcs := template.FuncMap{
		"join": strings.Join,
		// page is what the layout needs: the page's title, whether it
		// updates itself, and the person.
		"page": func(root map[string]any, title string, live bool) map[string]any {
			out := map[string]any{"Title": title, "Live": live}
			for _, k := range []string{"Who", "Groups", "Path", "LinkOnly", "CSRF"} {
				out[k] = root[k]
			}
			return out
		},
	}
	out := map[string]*template.Template{}
	for name, file := range pageNames {
		t, err := template.New(name).Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/"+file+".html")
		if err != nil {
			return nil, err
		}
		out[name] = t
	}
	return out, nil
}
