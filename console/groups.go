package console

import (
	"context"
	"net/http"
	"time"

	"github.com/jetledger/jetledger/group"
)

// groupView is a group's status, with what needs a person said.
type groupView struct {
	group.Status
	Attention string
}

// groupsPage shows every group of hosts in the connection's bucket: its
// members and each partition's state (owned, moving, unowned), read now.
func (h *Handler) groupsPage(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	var data struct {
		Groups []groupView
		Err    string
	}
	names, err := group.Groups(ctx, h.opts.JetStream)
	for _, name := range names {
		st, rerr := group.ReadStatus(ctx, h.opts.JetStream, name, "", "")
		if rerr != nil {
			err = rerr
			continue
		}
		v := groupView{Status: st}
		if a := st.Attention(); a != nil {
			v.Attention = a.Error()
		}
		data.Groups = append(data.Groups, v)
	}
	if err != nil {
		data.Err = "the groups could not all be read: " + err.Error()
	}
	h.render(w, r, "groups", sessionOf(r), data)
}
