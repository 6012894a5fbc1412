package main

import (
	"bytes"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// conflictSource is a test file around body; the lines of body ending in "// want" are the
// ones the check must report.
func conflictSource(imports, body string) string {
	return "package p\n\nimport (\n" + imports + "\n)\n\nfunc f() {\n" + body + "\n}\n"
}

// wantLines are the lines of src marked "// want".
func wantLines(src string) []int {
	var lines []int
	for i, line := range strings.Split(src, "\n") {
		if strings.HasSuffix(line, "// want") {
			lines = append(lines, i+1)
		}
	}
	return lines
}

func TestCheckConflicts(t *testing.T) {
	const std = `"k8s.io/client-go/util/retry"`
	for _, tc := range []struct {
		name, imports, body string
	}{
		{name: "update after a get", imports: std, body: `
	must(t, k8s.Get(ctx, key, &dep))
	dep.Spec.Replicas = ptr.To[int32](2)
	must(t, k8s.Update(ctx, &dep)) // want`},
		{name: "status subresource", imports: std, body: `
	pod.Status.Phase = corev1.PodRunning
	err := k8s.Status().Update(ctx, pod) // want
	_ = err`},
		{name: "named subresource", imports: std, body: `
	must(t, k8s.SubResource("resize").Update(ctx, pod)) // want`},
		{name: "typed clientset", imports: std, body: `
	_, err := cs.AppsV1().Deployments(ns).Update(ctx, dep, metav1.UpdateOptions{}) // want
	_, err = cs.CoreV1().Pods(ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{}) // want
	_ = err`},
		{name: "polling re-reads but is no retry the check knows", imports: std, body: `
	eventually(t, "the set to be updated", func() (bool, string) {
		must(t, k8s.Get(ctx, key, &set))
		err := k8s.Update(ctx, &set) // want
		return err == nil, fmt.Sprint(err)
	})`},
		{name: "inside RetryOnConflict", imports: std, body: `
	must(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var dep appsv1.Deployment
		if err := k8s.Get(ctx, key, &dep); err != nil {
			return err
		}
		return k8s.Update(ctx, &dep)
	}))`},
		{name: "inside OnError", imports: std, body: `
	err := retry.OnError(retry.DefaultBackoff, apierrors.IsConflict, func() error {
		must(t, k8s.Get(ctx, key, pod))
		return k8s.Status().Update(ctx, pod)
	})
	_ = err`},
		{name: "nested deeper in the retried function", imports: std, body: `
	must(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		write := func() error { return k8s.Update(ctx, obj) }
		return write()
	}))`},
		{name: "retry imported under another name", imports: `backoff "k8s.io/client-go/util/retry"`, body: `
	must(t, backoff.RetryOnConflict(backoff.DefaultRetry, func() error { return k8s.Update(ctx, obj) }))`},
		{name: "a retry package that is not client-go's", imports: `"example.com/retry"`, body: `
	must(t, retry.RetryOnConflict(retry.DefaultRetry, func() error { return k8s.Update(ctx, obj) })) // want`},
		{name: "update beside the retry, not in it", imports: std, body: `
	fn := func() error { return nil }
	must(t, retry.RetryOnConflict(retry.DefaultRetry, fn))
	must(t, k8s.Update(ctx, obj)) // want`},
		{name: "marked on the line before", imports: std, body: `
	//conflict-safe: the webhook must refuse this update; nothing else writes the object
	err := k8s.Update(ctx, &cfg)
	_ = err`},
		{name: "marked on the same line", imports: std, body: `
	_ = k8s.Status().Update(ctx, pod) //conflict-safe: the fake kubelet writes again at its next scan`},
		{name: "mark without a reason", imports: std, body: `
	//conflict-safe:
	must(t, k8s.Update(ctx, obj)) // want`},
		{name: "mark too far above", imports: std, body: `
	//conflict-safe: no other writer

	must(t, k8s.Update(ctx, obj)) // want`},
		{name: "patches and other methods named Update", imports: std, body: `
	must(t, k8s.Patch(ctx, obj, client.MergeFrom(base)))
	h.Update(data)
	bar.Update()`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := conflictSource(tc.imports, tc.body)
			findings, err := checkConflicts(token.NewFileSet(), "x_test.go", []byte(src))
			if err != nil {
				t.Fatal(err)
			}
			var got []int
			for _, f := range findings {
				got = append(got, f.pos.Line)
				if !strings.Contains(f.String(), "retry.RetryOnConflict") || !strings.Contains(f.String(), safeMark) {
					t.Errorf("finding %q gives no hint", f)
				}
			}
			if want := wantLines(src); !slices.Equal(got, want) {
				t.Errorf("reported lines %v, want %v; findings:\n%v\nsource:\n%s", got, want, findings, src)
			}
		})
	}
}

func TestCheckConflictsSaysWhatItFound(t *testing.T) {
	src := conflictSource(`"k8s.io/client-go/util/retry"`, "\t//conflict-safe:\n\tmust(t, k8s.Status().Update(ctx, pod))")
	findings, err := checkConflicts(token.NewFileSet(), "x_test.go", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if len(findings) != 1 || !strings.HasPrefix(findings[0].String(), "x_test.go:9:10: k8s.Status().Update marked //conflict-safe: without a reason: ") {
		t.Fatalf("findings %v", findings)
	}
}

// TestConflictCheckCommand runs the subcommand over a tree: DIR/... reaches subdirectories
// but not testdata, and any finding fails it.
func TestConflictCheckCommand(t *testing.T) {
	dir := t.TempDir()
	write := func(rel, body string) {
		t.Helper()
		path := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(conflictSource(`"k8s.io/client-go/util/retry"`, body)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("clean_test.go", "\tmust(t, retry.RetryOnConflict(retry.DefaultRetry, func() error { return k8s.Update(ctx, obj) }))")
	write("e2e/racy_test.go", "\tmust(t, k8s.Update(ctx, obj))")
	write("testdata/ignored_test.go", "\tmust(t, k8s.Update(ctx, obj))")

	var out bytes.Buffer
	err := run([]string{"conflictcheck", dir + "/..."}, nil, &out)
	if err == nil || !strings.Contains(err.Error(), "1 updates may fail") {
		t.Errorf("error %v, want one finding", err)
	}
	if lines := strings.Split(strings.TrimSpace(out.String()), "\n"); len(lines) != 1 || !strings.HasPrefix(lines[0], filepath.Join(dir, "e2e", "racy_test.go")+":8:") {
		t.Errorf("output %q, want the racy file's update alone", out.String())
	}

	out.Reset()
	if err := run([]string{"conflictcheck", dir}, nil, &out); err != nil || out.Len() != 0 {
		t.Errorf("the directory alone (not below it): %v, output %q", err, out.String())
	}
	if err := run([]string{"conflictcheck", filepath.Join(dir, "missing")}, nil, &out); err == nil {
		t.Error("a missing path was accepted")
	}
}
