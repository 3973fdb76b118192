package fleet

import (
	"encoding/json"
	"errors"
	"fmt"
)

var (
	// ErrEphemeralSource: the hub's effects stream sources a site's
	// effects without a durable consumer (made by hand or an earlier
	// release); AddSite does not switch it, as that copies the site's
	// effects again from the consumer's start.
	ErrEphemeralSource = errors.New("fleet: the effects stream sources the site without a durable consumer")
	// ErrInvalidSite: a Site without a valid domain or stream name.
	ErrInvalidSite = errors.New("fleet: invalid site")
)

// pubAckError is the error in a JetStream publish's reply, nil for an ack.
func pubAckError(data []byte) error {
	var ack struct {
		Error *struct {
			Code        int    `json:"code"`
			Description string `json:"description"`
		} `json:"error"`
		Stream string `json:"stream"`
	}
	if err := json.Unmarshal(data, &ack); err != nil {
		return fmt.Errorf("fleet: the hub's reply %q: %w", data, err)
	}
	if ack.Error != nil {
		return fmt.Errorf("fleet: the hub refused the record: %s (%d)", ack.Error.Description, ack.Error.Code)
	}
	return nil
}
