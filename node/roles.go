package node

import (
	"github.com/jetledger/jetledger/admin"
	"slices"

	"github.com/nats-io/nats-server/v2/server"
)

// The people's roles beside admin and publisher: an operator uses the
// admin API (package admin) and reads the stream's and consumers' state,
// and deletes nothing; a viewer reads through the admin API only. Each
// subscribes only under its inbox prefix (nats.CustomInboxPrefix), so
// that no reply to another client's request reaches it.
const (
	OperatorInboxPrefix = "_INBOX.operators"
	ViewerInboxPrefix   = "_INBOX.viewers"

	roleOperator = "operator"
	roleViewer   = "viewer"
)

// adminAPI is where every run's admin API is:
// <prefix>.<site>.<stream>.<durable>.<endpoint>.
const adminAPI = admin.SubjectPrefix

// viewerEndpoints are the admin API's reads.
var viewerEndpoints = admin.Reads

// jsReads are the JetStream API's reads of streams and consumers, and
// micro's discovery ($SRV): what status and fleet ask.
var jsReads = []string{"$SRV.>", "$JS.API.INFO", "$JS.API.STREAM.INFO.*", "$JS.API.STREAM.NAMES", "$JS.API.STREAM.LIST",
	"$JS.API.CONSUMER.INFO.*.*", "$JS.API.CONSUMER.NAMES.*", "$JS.API.CONSUMER.LIST.*"}

// operatorPermissions: the whole admin API, the reads, replies under its
// inbox.
func operatorPermissions() *server.Permissions {
	return &server.Permissions{
		Publish:   &server.SubjectPermission{Allow: append([]string{adminAPI + ".>"}, jsReads...)},
		Subscribe: &server.SubjectPermission{Allow: []string{OperatorInboxPrefix + ".>"}},
	}
}

// viewerPermissions: the admin API's reads, the reads, replies under its
// inbox.
func viewerPermissions() *server.Permissions {
	allow := slices.Clone(jsReads)
	for _, e := range viewerEndpoints {
		allow = append(allow, adminAPI+".*.*.*."+e, adminAPI+".*.*.*.standby."+e) // an owner's, a standby's
	}
	return &server.Permissions{
		Publish:   &server.SubjectPermission{Allow: allow},
		Subscribe: &server.SubjectPermission{Allow: []string{ViewerInboxPrefix + ".>"}},
	}
}

// checkRole gives c the operator's or the viewer's role when its token is
// one of theirs.
func (a *authenticator) checkRole(c server.ClientAuthentication, tok string) bool {
	for _, r := range []struct {
		tokens []string
		role   string
		perms  func() *server.Permissions
	}{{a.operators, roleOperator, operatorPermissions}, {a.viewers, roleViewer, viewerPermissions}} {
		for _, t := range r.tokens {
			if equal(tok, t) {
				return a.register(c, r.role, r.perms())
			}
		}
	}
	return false
}

// responderPermissions are the admin API's own connection's (Node.
// AdminConn): it takes requests under the API's subjects and micro's
// discovery, and answers only to inboxes. Its client names the reply
// subject, and nats-server checks no permission on it: a reply of the
// run's own connection to $JS.API.… or to a stream's subject would act,
// or be stored, with the run's rights (TestAViewersReplySubjectCannotActAsTheRun).
func responderPermissions() *server.Permissions {
	return &server.Permissions{
		Publish:   &server.SubjectPermission{Allow: []string{"_INBOX.>", "_INBOX_*.>"}},
		Subscribe: &server.SubjectPermission{Allow: []string{adminAPI + ".>", "$SRV.>"}},
	}
}
