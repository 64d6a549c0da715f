// Command icebench reproduces the tables of the seed benchmark report (shared/seeds/iceberg-benchmark-results.txt)
// with this library, side by side with a naive baseline measured in the same invocation (iceberg-go's
// Table.Append, one commit per batch) and the seed's own figures. It prints one markdown table per subcommand
// and, with -plots, writes an SVG plot per table.
//
//	go run . all                      # every table, 1,000,000 events per throughput point, embedded catalog
//	go run . all -quick               # smoke run (CI): tiny row counts, few points, under a minute
//	go run . cpu -rows 200000 -plots ../../docs/benchmarks
//	go run . inflight -commit-latency 320ms   # model AWS Glue's commit latency (5.2s: Unity Catalog)
//	go run . all -catalog 'rest://127.0.0.1:8181?warehouse=s3://iceberg-tables' -credential test:testsecret \
//	    -s3-endpoint http://127.0.0.1:8333 -s3-access-key test -s3-secret-key testsecret
//
// Subcommands: cpu, inflight, cow, cow-mem, mor, all. Flags may come before or after the subcommand.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"
)

var subcommands = []string{"cpu", "inflight", "cow", "cow-mem", "mor"}

func main() {
	slog.SetLogLoggerLevel(slog.LevelWarn) // the writers' Info line per commit would drown the progress and report
	if err := run(context.Background(), os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "icebench:", err)
		os.Exit(1)
	}
}

func usage(fs *flag.FlagSet) func() {
	return func() {
		fmt.Fprintf(fs.Output(), "usage: icebench [flags] {%s|all} [flags]\n\n", strings.Join(subcommands, "|"))
		fs.PrintDefaults()
	}
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	var cfg config
	fs := flag.NewFlagSet("icebench", flag.ContinueOnError)
	fs.Usage = usage(fs)
	fs.IntVar(&cfg.rows, "rows", 1_000_000, "seed events per throughput point (default with -quick: 10,000)")
	fs.BoolVar(&cfg.quick, "quick", false, "smoke run: few points and tiny row counts (CI)")
	fs.StringVar(&cfg.dir, "dir", "", "embedded backend: folder for the SQLite catalog and the warehouse (default: a temporary folder, removed afterwards)")
	fs.BoolVar(&cfg.keep, "keep", false, "keep the temporary folder and the tables")
	fs.StringVar(&cfg.catalogURI, "catalog", "", "catalog URI: empty for the embedded SQLite catalog, or rest://host:port?warehouse=...&credential=id:secret")
	fs.StringVar(&cfg.credential, "credential", "", "REST catalog OAuth2 client credentials id:secret")
	fs.StringVar(&cfg.token, "token", "", "REST catalog bearer token")
	fs.StringVar(&cfg.warehouse, "warehouse", "", "warehouse to ask the REST catalog for")
	fs.StringVar(&cfg.s3Endpoint, "s3-endpoint", "", "S3 endpoint for table files (empty: AWS)")
	fs.StringVar(&cfg.s3Region, "s3-region", "", "S3 region (default us-east-1)")
	fs.StringVar(&cfg.s3AccessKey, "s3-access-key", os.Getenv("AWS_ACCESS_KEY_ID"), "S3 access key id (default $AWS_ACCESS_KEY_ID)")
	fs.StringVar(&cfg.s3SecretKey, "s3-secret-key", "", "S3 secret access key (default $AWS_SECRET_ACCESS_KEY)")
	fs.DurationVar(&cfg.commitLatency, "commit-latency", 0, "latency injected before every catalog commit, ours and the baseline's (320ms: AWS Glue, 5.2s: Unity Catalog)")
	fs.StringVar(&cfg.plots, "plots", "", "write an SVG plot per table into this folder")
	fs.StringVar(&cfg.out, "o", "", "write the markdown report to this file (default: stdout)")
	fs.StringVar(&cfg.namespace, "namespace", "icebench", "namespace of the benchmark tables")
	fs.BoolVar(&cfg.progress, "progress", true, "progress on stderr")
	fs.IntVar(&cfg.repeat, "repeat", 1, "run each throughput point this many times and report the median")

	if err := fs.Parse(args); err != nil {
		return err
	}
	var cmds []string
	for fs.NArg() > 0 {
		cmds = append(cmds, fs.Arg(0))
		if err := fs.Parse(fs.Args()[1:]); err != nil {
			return err
		}
	}
	if len(cmds) == 0 {
		fs.Usage()
		return fmt.Errorf("no subcommand")
	}
	var todo []string
	for _, c := range cmds {
		switch {
		case c == "all":
			todo = append(todo, subcommands...)
		case contains(subcommands, c):
			todo = append(todo, c)
		default:
			return fmt.Errorf("unknown subcommand %q (want one of %s, all)", c, strings.Join(subcommands, ", "))
		}
	}
	if cfg.s3SecretKey == "" {
		cfg.s3SecretKey = os.Getenv("AWS_SECRET_ACCESS_KEY")
	}
	rowsSet := false
	fs.Visit(func(f *flag.Flag) { rowsSet = rowsSet || f.Name == "rows" })
	if cfg.quick && !rowsSet {
		cfg.rows = 10_000
	}
	if cfg.rows <= 0 {
		return fmt.Errorf("-rows must be positive")
	}

	e, err := openEnv(ctx, cfg)
	if err != nil {
		return err
	}
	defer e.close()

	out := stdout
	var mdDir string
	if cfg.out != "" {
		f, err := os.Create(cfg.out)
		if err != nil {
			return err
		}
		defer f.Close()
		out = f
		mdDir = filepath.Dir(cfg.out)
	}
	start := time.Now()
	fmt.Fprintf(out, "# icebench: `icebench %s`\n\n", strings.Join(args, " "))
	for _, m := range machine() {
		fmt.Fprintf(out, "- %s\n", m)
	}
	fmt.Fprintf(out, "- Backend: %s\n", e.backend)
	if la := loadAvg(); la != "" {
		fmt.Fprintf(out, "- Load average at start (1/5/15 min): %s (other work on the machine lowers every figure)\n", la)
	}
	if cfg.quick {
		fmt.Fprintf(out, "- **-quick**: a smoke run; its figures are not benchmarks\n")
	}
	fmt.Fprintln(out)

	for _, c := range todo {
		var s *section
		switch c {
		case "cpu":
			s, err = e.cpuTable(ctx)
		case "inflight":
			s, err = e.inflightTable(ctx)
		case "cow":
			s, err = e.cowTable(ctx)
		case "cow-mem":
			s, err = e.cowMemTable(ctx)
		case "mor":
			s, err = e.morTable(ctx)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", c, err)
		}
		ref := ""
		if p, err := s.writePlot(cfg.plots); err != nil {
			return err
		} else if p != "" {
			ref = p
			if mdDir != "" {
				absMD, err1 := filepath.Abs(mdDir)
				absP, err2 := filepath.Abs(p)
				if r, err := filepath.Rel(absMD, absP); err1 == nil && err2 == nil && err == nil {
					ref = r
				}
			}
			ref = filepath.ToSlash(ref)
		}
		s.write(out, ref)
	}
	end := ""
	if la := loadAvg(); la != "" {
		end = "; load average at the end: " + la
	}
	fmt.Fprintf(out, "_Total run time: %s%s._\n", time.Since(start).Round(time.Second), end)
	return nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
