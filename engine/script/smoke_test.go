package script

import (
	"context"
	"encoding/json"
	"testing"
)

func TestSmoke(t *testing.T) {
	rn := NewRunner(Limits{})
	coll := newFakeCollection()
	res, err := rn.Execute(context.Background(), Script{ID: "addOrder", Body: `function addOrder(order) {
    var ctx = getContext();
    var coll = ctx.getCollection();
    var ok = coll.createDocument(coll.getSelfLink(), order,
        function (err, doc) {
            if (err) throw err;
            ctx.getResponse().setBody(doc.id);
        });
    if (!ok) throw new Error("not accepted, try again");
}`}, []json.RawMessage{json.RawMessage(`{"id":"o9","customerId":"c1","total":30.5}`)}, coll, ExecuteOptions{})
	t.Logf("res=%s err=%v", res.Body, err)
}
