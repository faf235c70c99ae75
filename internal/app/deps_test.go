package app

import (
	"bufio"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/tollgate/tollgate/"

// The package table of docs/design.md is the import rule, and it must be
// true: every package it names exists, every package of the module is in
// it, and no package imports (directly or not) what its row forbids. So
// the map cannot drift from the code, and the data path (wire, quota,
// admission, auth, accept, proxy, enforce) never imports the control side.
func TestImportRule(t *testing.T) {
	rows := designTable(t)
	deps := moduleDeps(t)

	for pkg := range deps {
		if _, ok := rows[pkg]; !ok {
			t.Errorf("package %s is not in docs/design.md's package table", pkg)
		}
	}
	for pkg, rule := range rows {
		d, ok := deps[pkg]
		if !ok {
			t.Errorf("docs/design.md names package %s, which does not exist", pkg)
			continue
		}
		for _, dep := range d {
			if dep == pkg || strings.HasPrefix(dep, pkg+"/") && rule.leaf {
				continue // itself; a leaf's own subpackages are the leaf
			}
			if rule.forbids(dep) {
				t.Errorf("%s imports %s, which docs/design.md's table forbids (%q)", pkg, dep, rule.text)
			}
		}
	}

	// The composition root holds no Kafka logic: no file of it reads or
	// writes Kafka messages (kmsg); the filters, sinks and publishers that
	// do live in the packages that own them.
	for _, f := range appImports(t) {
		if f.path == kmsgPath {
			t.Errorf("internal/app/%s imports %s: Kafka logic belongs to the packages below the root (docs/design.md)", f.file, kmsgPath)
		}
	}

	// Nothing below the composition root imports it: only the commands,
	// the test harness, the tests and the benchmarks may.
	mayImportApp := []string{"cmd/", "internal/testkit", "e2e", "bench/", "packaging"}
	for pkg, d := range deps {
		if !slices.Contains(d, "internal/app") || pkg == "internal/app" {
			continue
		}
		if !slices.ContainsFunc(mayImportApp, func(p string) bool { return strings.HasPrefix(pkg, p) }) {
			t.Errorf("%s imports internal/app: nothing below the composition root may", pkg)
		}
	}
}

const kmsgPath = "github.com/twmb/franz-go/pkg/kmsg"

type fileImport struct{ file, path string }

// appImports lists what each Go file of internal/app imports, tests
// included.
func appImports(t *testing.T) []fileImport {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var out []fileImport
	fs := token.NewFileSet()
	for _, name := range files {
		f, err := parser.ParseFile(fs, name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, im := range f.Imports {
			p, _ := strconv.Unquote(im.Path.Value)
			out = append(out, fileImport{name, p})
		}
	}
	if len(out) == 0 {
		t.Fatal("internal/app has no imports")
	}
	return out
}

type importRule struct {
	text    string
	leaf    bool     // nothing of the project...
	allowed []string // ...but these
	denied  []string // or exactly these
}

func (r importRule) forbids(dep string) bool {
	if r.leaf {
		return !slices.ContainsFunc(r.allowed, func(a string) bool { return dep == a || strings.HasPrefix(dep, a+"/") })
	}
	return slices.ContainsFunc(r.denied, func(d string) bool { return dep == d || strings.HasPrefix(dep, d+"/") })
}

var backticked = regexp.MustCompile("`([^`]+)`")

// designTable reads docs/design.md's package table: package → its rule.
func designTable(t *testing.T) map[string]importRule {
	t.Helper()
	f, err := os.Open("../../docs/design.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows := map[string]importRule{}
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "| package | owns | may not import |"):
			in = true
			continue
		case !in || strings.HasPrefix(line, "|---"):
			continue
		case !strings.HasPrefix(line, "|"):
			if len(rows) > 0 {
				return rows
			}
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if len(cells) != 3 {
			t.Fatalf("docs/design.md: a package row with %d cells: %q", len(cells), line)
		}
		m := backticked.FindStringSubmatch(cells[0])
		if m == nil {
			t.Fatalf("docs/design.md: no `package` in %q", cells[0])
		}
		rows[m[1]] = parseRule(t, strings.TrimSpace(cells[2]))
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(rows) == 0 {
		t.Fatal("docs/design.md has no package table")
	}
	return rows
}

func parseRule(t *testing.T, text string) importRule {
	r := importRule{text: text}
	internal := func(name string) string {
		name = strings.Trim(strings.TrimSpace(name), "`")
		if strings.Contains(name, "/") {
			return name
		}
		return "internal/" + name
	}
	switch {
	case text == "":
	case strings.HasPrefix(text, "nothing of the project"):
		r.leaf = true
		if _, but, ok := strings.Cut(text, " but "); ok {
			for _, a := range strings.Split(but, ",") {
				r.allowed = append(r.allowed, internal(a))
			}
		}
	default:
		for _, d := range strings.Split(text, ",") {
			if d = strings.TrimSpace(d); d == "" || strings.ContainsAny(d, " ()") {
				t.Fatalf("docs/design.md: %q is not a list of package names", text)
			}
			r.denied = append(r.denied, internal(d))
		}
	}
	return r
}

// moduleDeps lists every package of the module with the module packages
// it imports, directly or not, as paths relative to the module.
func moduleDeps(t *testing.T) map[string][]string {
	t.Helper()
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Deps}} {{.}}{{end}}`, "../../...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	deps := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		pkg, ok := strings.CutPrefix(f[0], module)
		if !ok {
			continue
		}
		var d []string
		for _, dep := range f[1:] {
			if rel, ok := strings.CutPrefix(dep, module); ok {
				d = append(d, rel)
			}
		}
		deps[pkg] = d
	}
	return deps
}

// maxFuncLines is the longest function body (the lines between its braces)
// the module's own code may have without saying why (issue #22).
const maxFuncLines = 80

// pendingLong lists the packages whose long functions are not split yet
// (none now): they are exempt meanwhile.
var pendingLong = []string{}

// Every function of the module (tests, generated code and bench/ aside)
// fits in maxFuncLines, or its doc comment has a line starting "Long:"
// that says why it must be longer.
func TestFunctionLength(t *testing.T) {
	for _, f := range longFuncs(t, "../..") {
		if slices.ContainsFunc(pendingLong, func(p string) bool { return f.dir == p || strings.HasPrefix(f.dir, p+"/") }) {
			continue
		}
		t.Errorf("%s: %s is %d lines long (at most %d, or a doc comment line starting \"Long:\" saying why)", f.pos, f.name, f.lines, maxFuncLines)
	}
}

type longFunc struct {
	dir, name string
	pos       token.Position
	lines     int
}

// longFuncs walks the module under root and returns each function over
// maxFuncLines whose doc comment does not say why it is long.
func longFuncs(t *testing.T, root string) []longFunc {
	t.Helper()
	var out []longFunc
	fs := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			name := d.Name()
			if rel == "bench" || name == "testdata" || name == "vendor" || rel != "." && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil && rel != "." {
				return filepath.SkipDir // another module
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fs, path, nil, parser.ParseComments)
		if err != nil {
			return err
		}
		if ast.IsGenerated(f) {
			return nil
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			n := fs.Position(fn.Body.Rbrace).Line - fs.Position(fn.Body.Lbrace).Line - 1
			if n <= maxFuncLines || saysLong(fn.Doc) {
				continue
			}
			pos := fs.Position(fn.Pos())
			pos.Filename = filepath.ToSlash(rel)
			out = append(out, longFunc{filepath.ToSlash(filepath.Dir(rel)), funcName(fn), pos, n})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// saysLong reports whether a doc comment has a line starting "Long:".
func saysLong(doc *ast.CommentGroup) bool {
	if doc == nil {
		return false
	}
	for _, line := range strings.Split(doc.Text(), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "Long:") {
			return true
		}
	}
	return false
}

// funcName is a function's name, with its receiver's type for a method.
func funcName(fn *ast.FuncDecl) string {
	if fn.Recv == nil || len(fn.Recv.List) == 0 {
		return fn.Name.Name
	}
	typ := fn.Recv.List[0].Type
	if s, ok := typ.(*ast.StarExpr); ok {
		typ = s.X
	}
	switch x := typ.(type) {
	case *ast.IndexExpr:
		typ = x.X
	case *ast.IndexListExpr:
		typ = x.X
	}
	if id, ok := typ.(*ast.Ident); ok {
		return id.Name + "." + fn.Name.Name
	}
	return fn.Name.Name
}
