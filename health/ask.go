package health

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
)

// Ask reads the report a Handler serves at url (http or https) with
// client (nil: http.DefaultClient): a container's health check, which
// has no curl. The error is one of reaching it or of its answer; an
// unhealthy report is a Report with Healthy false, not an error.
func Ask(ctx context.Context, client *http.Client, url string) (Report, error) {
	if client == nil {
		client = http.DefaultClient
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return Report{}, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return Report{}, err
	}
	defer resp.Body.Close()
	var rep Report
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err == nil {
		err = json.Unmarshal(body, &rep)
	}
	switch {
	case err != nil:
		return Report{}, fmt.Errorf("%s answered %s, not a health report: %w", url, resp.Status, err)
	case rep.Checks == nil:
		return Report{}, fmt.Errorf("%s answered %s, not a health report", url, resp.Status)
	case rep.Healthy != (resp.StatusCode == http.StatusOK):
		return Report{}, fmt.Errorf("%s answered %s with healthy=%v", url, resp.Status, rep.Healthy)
	}
	return rep, nil
}
