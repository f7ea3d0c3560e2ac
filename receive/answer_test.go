package receive

import (
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"

	"github.com/oncehook/oncehook/internal/jsonhttp"
)

// FuzzAnswer: intake's 200 answer is what jsonhttp.WriteJSON writes for
// it, the same bytes and the same headers, whatever its keys and
// statuses hold.
func FuzzAnswer(f *testing.F) {
	f.Add("accepted", "evt_1", "accepted", false, "keyless:00ff", "duplicate", true, 2)
	f.Add("duplicate", `a"b\c`, "accepted", false, "<&>\u2028\x7f\xff\x01", "accepted", true, 1)
	f.Add("accepted", "", "", false, "", "", false, 0)
	f.Add("accepted", "", "", false, "", "", false, -1)
	f.Fuzz(func(t *testing.T, status, key1, status1 string, keyless1 bool, key2, status2 string, keyless2 bool, n int) {
		resp := Response{Status: status}
		switch {
		case n < 0: // no events at all: null
		case n%3 == 0:
			resp.Events = []EventResult{}
		case n%3 == 1:
			resp.Events = []EventResult{{Key: key1, Status: status1, Keyless: keyless1}}
		default:
			resp.Events = []EventResult{{Key: key1, Status: status1, Keyless: keyless1}, {Key: key2, Status: status2, Keyless: keyless2}}
		}
		got, want := httptest.NewRecorder(), httptest.NewRecorder()
		writeAnswer(got, resp)
		jsonhttp.WriteJSON(want, http.StatusOK, resp)
		if got.Code != want.Code || got.Body.String() != want.Body.String() || !reflect.DeepEqual(got.Header(), want.Header()) {
			t.Fatalf("%+v:\n%d %v %q\nWriteJSON's:\n%d %v %q", resp, got.Code, got.Header(), got.Body, want.Code, want.Header(), want.Body)
		}
	})
}
