package conformance

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"time"
)

// The JUnit XML shape CI systems read: testsuites > testsuite > testcase,
// with failure and skipped children.
type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Name     string       `xml:"name,attr"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Skipped  int          `xml:"skipped,attr"`
	Time     string       `xml:"time,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name      string      `xml:"name,attr"`
	Tests     int         `xml:"tests,attr"`
	Failures  int         `xml:"failures,attr"`
	Errors    int         `xml:"errors,attr"`
	Skipped   int         `xml:"skipped,attr"`
	Time      string      `xml:"time,attr"`
	Timestamp string      `xml:"timestamp,attr"`
	Cases     []junitCase `xml:"testcase"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Time      string        `xml:"time,attr"`
	Failure   *junitMessage `xml:"failure,omitempty"`
	Skipped   *junitMessage `xml:"skipped,omitempty"`
}

type junitMessage struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr,omitempty"`
	Text    string `xml:",chardata"`
}

// WriteJUnit writes the results as JUnit XML.
func WriteJUnit(w io.Writer, results []Result, started time.Time) error {
	suite := junitSuite{Name: "nodeagent-conformance", Timestamp: started.UTC().Format(time.RFC3339)}
	var total time.Duration
	for _, r := range results {
		c := junitCase{Name: r.Name, Classname: "nodeagent.conformance", Time: seconds(r.Duration)}
		switch r.Status {
		case Failed:
			c.Failure = &junitMessage{Message: r.Reason, Type: "Failure", Text: r.Reason}
			suite.Failures++
		case Skipped:
			c.Skipped = &junitMessage{Message: r.Reason}
			suite.Skipped++
		}
		total += r.Duration
		suite.Cases = append(suite.Cases, c)
	}
	suite.Tests, suite.Time = len(results), seconds(total)
	doc := junitSuites{Name: suite.Name, Tests: suite.Tests, Failures: suite.Failures, Skipped: suite.Skipped, Time: suite.Time, Suites: []junitSuite{suite}}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}

// WriteJSON writes the results with their counts.
func WriteJSON(w io.Writer, results []Result) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	n := Counts(results)
	return enc.Encode(map[string]any{"passed": n[Passed], "failed": n[Failed], "skipped": n[Skipped], "results": results})
}

func seconds(d time.Duration) string { return fmt.Sprintf("%.3f", d.Seconds()) }
