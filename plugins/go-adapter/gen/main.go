// Command gen turns a Tyk Go plugin package into a package that builds,
// with `go build -buildmode=c-shared`, into a library speaking the
// gateway's C plugin ABI (plugins/sdk/include/gw_plugin.h).
//
// Usage: go run . [-bounded] BUILD_DIR GW_PLUGIN_H
//
// BUILD_DIR holds a copy of the plugin's .go files (build.sh makes it). The
// generator finds every handler, a top-level
// `func Name(http.ResponseWriter, *http.Request)`, and writes into BUILD_DIR:
//
//   - gw_runtime.go: the adapter (embedded below from gw_runtime.go.in):
//     builds an *http.Request from the host callbacks, runs the handler
//     with a panic guard and the gateway's time budget, writes the edits
//     back;
//   - gw_exports.go: one exported C entry gw_go_<Name> per handler, and the
//     marker gw_go_adapter_handlers() listing them, which the gateway reads
//     to resolve a definition's "name": "<Name>" to its entry;
//   - gw_plugin.h: the ABI header, for cgo.
//
// The plugin's own files are never edited: the seed's main.go builds as is.
package main

import (
	_ "embed"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

//go:embed gw_runtime.go.in
var runtimeSource string

// tykCtx is the import path of Tyk's ctx package; a plugin importing it
// gets the API definition put in its request's context.
const tykCtx = "github.com/TykTechnologies/tyk/ctx"

func main() {
	bounded := flag.Bool("bounded", false, "run handlers on a goroutine bounded by the gateway's budget by default")
	flag.Parse()
	if flag.NArg() != 2 {
		fmt.Fprintln(os.Stderr, "usage: gen [-bounded] BUILD_DIR GW_PLUGIN_H")
		os.Exit(2)
	}
	if err := run(flag.Arg(0), flag.Arg(1), *bounded); err != nil {
		fmt.Fprintln(os.Stderr, "go-adapter:", err)
		os.Exit(1)
	}
}

func run(dir, header string, bounded bool) error {
	handlers, usesCtx, err := scan(dir)
	if err != nil {
		return err
	}
	h, err := os.ReadFile(header)
	if err != nil {
		return err
	}
	files := map[string]string{
		"gw_plugin.h":   string(h),
		"gw_runtime.go": runtimeSource,
		"gw_exports.go": exports(handlers, usesCtx, bounded),
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			return err
		}
	}
	fmt.Fprintf(os.Stderr, "go-adapter: handlers %s\n", strings.Join(handlers, ", "))
	return nil
}

// scan parses the package and returns its handlers, sorted, and whether it
// imports Tyk's ctx package. A syntax error is reported as Go reports it.
func scan(dir string) ([]string, bool, error) {
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, dir, func(fi os.FileInfo) bool {
		return !strings.HasSuffix(fi.Name(), "_test.go") && !strings.HasPrefix(fi.Name(), "gw_")
	}, 0)
	if err != nil {
		return nil, false, err
	}
	if len(pkgs) != 1 {
		return nil, false, fmt.Errorf("%s: want exactly one Go package, found %d", dir, len(pkgs))
	}
	var handlers []string
	usesCtx := false
	for name, pkg := range pkgs {
		if name != "main" {
			return nil, false, fmt.Errorf("package %s: a Tyk Go plugin is package main", name)
		}
		for _, f := range pkg.Files {
			httpName, ctx := imports(f)
			usesCtx = usesCtx || ctx
			for _, d := range f.Decls {
				if fn, ok := d.(*ast.FuncDecl); ok && isHandler(fn, httpName) {
					handlers = append(handlers, fn.Name.Name)
				}
			}
		}
	}
	if len(handlers) == 0 {
		return nil, false, fmt.Errorf("%s: no handler: want a top-level exported "+
			"func Name(http.ResponseWriter, *http.Request)", dir)
	}
	sort.Strings(handlers)
	return handlers, usesCtx, nil
}

// imports returns the file's local name for net/http ("" when not
// imported) and whether it imports Tyk's ctx.
func imports(f *ast.File) (string, bool) {
	httpName, ctx := "", false
	for _, imp := range f.Imports {
		path, _ := strconv.Unquote(imp.Path.Value)
		switch path {
		case "net/http":
			httpName = "http"
			if imp.Name != nil {
				httpName = imp.Name.Name
			}
		case tykCtx:
			ctx = true
		}
	}
	return httpName, ctx
}

// isHandler: exported, no receiver, no results, and exactly the parameters
// (http.ResponseWriter, *http.Request): Tyk's Go plugin signature.
func isHandler(fn *ast.FuncDecl, httpName string) bool {
	if fn.Recv != nil || !fn.Name.IsExported() || httpName == "" || fn.Type.Results != nil {
		return false
	}
	var types []ast.Expr
	for _, field := range fn.Type.Params.List {
		n := len(field.Names)
		if n == 0 {
			n = 1
		}
		for i := 0; i < n; i++ {
			types = append(types, field.Type)
		}
	}
	if len(types) != 2 {
		return false
	}
	star, ok := types[1].(*ast.StarExpr)
	return ok && isSel(types[0], httpName, "ResponseWriter") && isSel(star.X, httpName, "Request")
}

func isSel(e ast.Expr, pkg, name string) bool {
	sel, ok := e.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	id, ok := sel.X.(*ast.Ident)
	return ok && id.Name == pkg && sel.Sel.Name == name
}

// exports writes gw_exports.go: the ABI version, the marker, one entry per
// handler, and gwDefine (the API definition for Tyk's ctx, when imported).
func exports(handlers []string, usesCtx, bounded bool) string {
	var b strings.Builder
	b.WriteString("// Code generated by plugins/go-adapter/gen; DO NOT EDIT.\n\n")
	b.WriteString("package main\n\n/*\n#include \"gw_plugin.h\"\n*/\nimport \"C\"\n\n")
	if usesCtx {
		b.WriteString(ctxSupport)
	} else {
		b.WriteString(noCtx)
	}
	b.WriteString("\n// gwDefaultBounded: the mode build.sh was asked for (see gwBounded).\n")
	fmt.Fprintf(&b, "const gwDefaultBounded = %v\n", bounded)
	fmt.Fprintf(&b, "\nvar gwHandlerList = C.CString(%q)\n\n", strings.Join(handlers, ","))
	b.WriteString("// gw_plugin_abi_version is the ABI version the gateway checks at load.\n")
	b.WriteString("//\n//export gw_plugin_abi_version\n")
	b.WriteString("func gw_plugin_abi_version() C.uint32_t { return C.GW_PLUGIN_ABI_VERSION }\n\n")
	b.WriteString("// gw_go_adapter_handlers is the marker the gateway looks for: \"Go adapter,\n")
	b.WriteString("// these handlers\" (comma-separated).\n")
	b.WriteString("//\n//export gw_go_adapter_handlers\n")
	b.WriteString("func gw_go_adapter_handlers() *C.char { return gwHandlerList }\n")
	for _, h := range handlers {
		fmt.Fprintf(&b, "\n// gw_go_%s runs the plugin's %s.\n//\n//export gw_go_%s\n", h, h, h)
		fmt.Fprintf(&b, "func gw_go_%s(host *C.GwHost, req *C.GwRequest) C.int32_t {\n", h)
		fmt.Fprintf(&b, "\treturn gwCall(host, req, %q, %s)\n}\n", h, h)
	}
	return b.String()
}

// noCtx: the package does not import Tyk's ctx, so no request pays for it.
const noCtx = `import gwhttp "net/http"

const gwUsesCtx = false

func gwDefine(*gwhttp.Request, string, string) {}
`

// ctxSupport: the definition is parsed once per API (and again only when
// its config_data changes, after a reload) and shared by its requests, as
// Tyk shares an API's spec.
// Its imports are named gw* like the runtime's: the plugin's own
// package-level names must not collide with them.
const ctxSupport = `import (
	gwjson "encoding/json"
	gwhttp "net/http"
	gwstrings "strings"
	gwsync "sync"

	gwapidef "github.com/TykTechnologies/tyk/apidef"
	gwtykctx "github.com/TykTechnologies/tyk/ctx"
)

const gwUsesCtx = true

type gwDef struct {
	raw string
	def *gwapidef.APIDefinition
}

var gwDefs gwsync.Map // api_id -> *gwDef

// gwDefine puts the API definition in r's context. apiID and raw are views
// of the host's bytes: copied before they are kept.
func gwDefine(r *gwhttp.Request, apiID, raw string) {
	if v, ok := gwDefs.Load(apiID); ok && v.(*gwDef).raw == raw {
		gwtykctx.SetDefinition(r, v.(*gwDef).def)
		return
	}
	d := &gwDef{raw: gwstrings.Clone(raw), def: &gwapidef.APIDefinition{APIID: gwstrings.Clone(apiID)}}
	// The gateway serialised config_data itself, and its load refuses a
	// Go plugin's API whose config_data is not an object or null: it parses.
	_ = gwjson.Unmarshal([]byte(d.raw), &d.def.ConfigData)
	gwDefs.Store(d.def.APIID, d)
	gwtykctx.SetDefinition(r, d.def)
}
`
