package kafka

import (
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// ToolLog4j2 is the name of the log4j2 configuration Tool gives the JVM
// when dir holds one (as the nodes' JVMs have theirs): without it log4j2's
// default configuration prints errors on stdout, among a tool's output.
const ToolLog4j2 = "log4j2.properties"

// ToolLog4j is the same for Kafka 3.x, which logs with reload4j (log4j
// 1.x's API): dir/log4j.properties, if it exists.
const ToolLog4j = "log4j.properties"

// Tool is the command line of a JVM running main with args, in dir, with
// the small heap Cluster.Java uses, and version's jars (Classpath: copied
// the first time) on its classpath: main is a class of the jars (a Kafka
// tool: org.apache.kafka.tools.TopicCommand, ...) or the path of a
// single-file Java source (it ends in .java: the launcher compiles it in
// memory, Java 11's source-file mode), which can use the jars. It needs no
// running cluster: tests that front the embedded one run Kafka's tools and
// Java client too. dir/log4j2.properties, if it exists, is the JVM's
// logging configuration.
func Tool(version, dir, main string, args ...string) (*exec.Cmd, error) {
	java, err := javaBin()
	if err != nil {
		return nil, err
	}
	cp, err := Classpath(version)
	if err != nil {
		return nil, err
	}
	if strings.HasSuffix(main, ".java") && !filepath.IsAbs(main) {
		// Relative to the caller's directory, not dir.
		if main, err = filepath.Abs(main); err != nil {
			return nil, err
		}
	}
	return toolCmd(java, cp, dir, main, args...), nil
}

// toolCmd is Tool's command line, for a known java and classpath.
func toolCmd(java, cp, dir, main string, args ...string) *exec.Cmd {
	jvm := []string{
		"-Xms32m", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-XX:-UsePerfData",
		"-Djava.awt.headless=true",
	}
	if l := filepath.Join(dir, ToolLog4j2); fileExists(l) {
		jvm = append(jvm, "-Dlog4j2.configurationFile="+l)
	}
	if l := filepath.Join(dir, ToolLog4j); fileExists(l) {
		jvm = append(jvm, "-Dlog4j.configuration=file:"+l)
	}
	jvm = append(jvm, "-cp", filepath.Join(cp, "*"), main)
	cmd := exec.Command(java, append(jvm, args...)...)
	cmd.Dir = dir
	return cmd
}

// perfMetricLine is a line of the perf tools' --print-metrics table:
// "group:name:{tag=value, ...} : value".
var perfMetricLine = regexp.MustCompile(`^([\w-]+):([\w-]+):\{([^}]*)\}\s*:\s*([-\d.E]+|NaN)\s*$`)

// PerfMetrics reads the --print-metrics table of ProducerPerformance or
// ConsumerPerformance: "group:name" → value, for the metrics tagged with
// the client-id.
func PerfMetrics(out, clientID string) map[string]float64 {
	m := map[string]float64{}
	for _, l := range strings.Split(out, "\n") {
		f := perfMetricLine.FindStringSubmatch(strings.TrimSpace(l))
		if f == nil || !strings.Contains(f[3], "client-id="+clientID) {
			continue
		}
		if v, err := strconv.ParseFloat(f[4], 64); err == nil {
			m[f[1]+":"+f[2]] = v
		}
	}
	return m
}
