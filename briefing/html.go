// The briefing as one standalone HTML page: no scripts, no outside
// resources, styles inline, every value escaped by html/template.
package briefing

import (
	"html/template"
	"io"
	"strings"
)

// HTML writes b as a standalone HTML page.
func HTML(w io.Writer, b Brief) error {
	return page.Execute(w, b)
}

var page = template.Must(template.New("brief").Funcs(template.FuncMap{
	"join":     strings.Join,
	"fallback": firstNonEmpty,
}).Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>Briefing: node {{.Node}}</title>
<style>
body{font-family:system-ui,sans-serif;margin:2em;max-width:80em;color:#222}
table{border-collapse:collapse;margin:.5em 0 1.5em}
th,td{border:1px solid #ccc;padding:.25em .6em;text-align:left;vertical-align:top}
th{background:#f3f3f3}
.risk{color:#a00}
</style></head><body>
<h1>Briefing: node {{.Node}}</h1>
<p>Role <b>{{.Role}}</b>, phase <b>{{.Phase}}</b>. Generated {{.GeneratedAt}} from {{.Source}}.
Values of files and settings are never shown: files are named by path and a shortened hash.</p>

<h2>Risks that need a decision</h2>
{{if .Risks}}<ul>{{range .Risks}}<li class="risk">{{.}}</li>{{end}}</ul>{{else}}<p>None found.</p>{{end}}

<h2>The found firewall</h2>
<p>Kind: <b>{{fallback .FirewallKind "unknown (no probe yet)"}}</b>. {{.FirewallNote}}</p>
{{if .Tables}}<table><tr><th>family</th><th>table</th><th>owner</th><th>chains</th></tr>
{{range .Tables}}<tr><td>{{.Family}}</td><td>{{.Name}}</td><td>{{.Owner}}</td><td>{{.Chains}}</td></tr>{{end}}</table>{{else}}<p>(none)</p>{{end}}
<h3>Open ports</h3>
{{if .Open}}<table><tr><th>port</th><th>family</th><th>direction</th><th>from</th><th>held by</th><th>certain</th></tr>
{{range .Open}}<tr><td>{{.Port}}</td><td>{{.Family}}</td><td>{{.Direction}}</td><td>{{fallback .From "any"}}</td><td>{{fallback .Holder "nothing listens"}}</td><td>{{if .Uncertain}}no: depends on a condition the evaluator cannot decide{{else}}yes{{end}}</td></tr>{{end}}</table>{{else}}<p>(none)</p>{{end}}

<h2>Containers</h2>
{{if .EngineNote}}<p>The container engine: {{.EngineNote}}</p>{{end}}
{{if .Containers}}<table><tr><th>name</th><th>image</th><th>state</th><th>published</th><th>mounts</th></tr>
{{range .Containers}}<tr><td>{{.Name}}</td><td>{{.Image}}</td><td>{{.State}}</td><td>{{.Ports}}</td><td>{{join .Mounts "; "}}</td></tr>{{end}}</table>{{else}}<p>(none)</p>{{end}}

<h2>Files in custody</h2>
{{if .Files}}<table><tr><th>path</th><th>state</th><th>mode</th><th>owner</th><th>sha256 (short)</th><th>converged by</th></tr>
{{range .Files}}<tr><td>{{.Path}}</td><td>{{.State}}</td><td>{{.Mode}}</td><td>{{.Owner}}</td><td>{{.Hash}}</td><td>{{.Module}}</td></tr>{{end}}</table>{{else}}<p>(none)</p>{{end}}

<h2>The foundation</h2>
{{if eq .Role "control"}}{{if .GenesisState}}<p>Genesis: {{.GenesisState}}</p>{{end}}{{if .Frozen}}<p>Note: {{.Frozen}}.</p>{{end}}
<table><tr><th>name</th><th>port</th><th>held by now</th></tr>
{{range .Foundation}}<tr><td>{{.Name}}</td><td>{{.Port}}</td><td>{{fallback .Holder "free"}}</td></tr>{{end}}</table>
{{else}}<p>A member node raises no foundation.</p>{{end}}

<h2>Modules</h2>
{{if .Modules}}<table><tr><th>module</th><th>state</th><th>predecessor</th><th>ports</th><th>files</th><th>conflicts</th></tr>
{{range .Modules}}<tr><td>{{.Name}}</td><td>{{.State}}</td><td>{{fallback .Predecessor "none"}}</td><td>{{.Ports}}</td><td>{{join .Files "; "}}</td><td>{{fallback (join .Conflicts "; ") "none"}}</td></tr>{{end}}</table>{{else}}<p>(none)</p>{{end}}

<h2>What a flip would do now</h2>
<p>Preview: {{.PreviewState}}</p>
{{if .PreviewWhy}}<ul>{{range .PreviewWhy}}<li>{{.}}</li>{{end}}</ul>{{end}}
{{if .Fates}}<table><tr><th>port</th><th>family</th><th>direction</th><th>fate</th><th>kept by</th></tr>
{{range .Fates}}<tr><td>{{.Port}}</td><td>{{.Family}}</td><td>{{.Direction}}</td><td>{{.Fate}}</td><td>{{.By}}</td></tr>{{end}}</table>{{end}}
{{if .NodeFiles}}<p>Node files, converged at the flip:</p><ul>{{range .NodeFiles}}<li>{{.}}</li>{{end}}</ul>{{end}}

<h2>Drift</h2>
{{if .Drift}}<ul>{{range .Drift}}<li>{{.}}</li>{{end}}</ul>{{else}}<p>None recorded.</p>{{end}}
</body></html>
`))
