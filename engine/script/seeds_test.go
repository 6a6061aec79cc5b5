package script

// Scripts from the seeds (stored procedure, trigger and UDF of seed 001,
// Question 4; the appendValue stored procedure of seed 003), verbatim.

const addOrderJS = `function addOrder(order) {
    var ctx = getContext();
    var coll = ctx.getCollection();
    var ok = coll.createDocument(coll.getSelfLink(), order,
        function (err, doc) {
            if (err) throw err;              // throw = roll back
            ctx.getResponse().setBody(doc.id);
        });
    if (!ok) throw new Error("not accepted, try again");
}`

const stampCreatedJS = `// pre-trigger: runs only when the write names it
function stampCreated() {
    var req = getContext().getRequest();
    var doc = req.getBody();
    doc.createdAt = new Date().toISOString();
    req.setBody(doc);
}`

const taxJS = `// UDF: called only inside a query
function tax(total) {
    return total * 0.08;
}`

const appendValueJS = `function appendValue(id, pkey, newValue) {
    var collection = getContext().getCollection();
    var response = getContext().getResponse();
    
    // 查询目标文档
    var query = "SELECT * FROM c WHERE c.id = @id AND c.pkey = @pkey";
    var parameters = [
        {name: "@id", value: id},
        {name: "@pkey", value: pkey}
    ];
    
    collection.queryDocuments(collection.getSelfLink(), query, {parameters: parameters}, function(err, docs) {
        if (err) throw err;
        
        if (docs.length > 0) {
            // 文档存在，追加value
            var doc = docs[0];
            doc.value.push(newValue);
            collection.replaceDocument(doc._self, doc, function(err, updatedDoc) {
                if (err) throw err;
                response.setBody(updatedDoc);
            });
        } else {
            // 文档不存在，创建新文档
            var newDoc = {
                id: id,
                pkey: pkey,
                value: [newValue]
            };
            collection.createDocument(collection.getSelfLink(), newDoc, function(err, createdDoc) {
                if (err) throw err;
                response.setBody(createdDoc);
            });
        }
    });
}`
