package engine

// queryScope returns the storage key prefix of the items a query scoped by
// the partition key pk reads. A full key scopes the query to one logical
// partition. On a hierarchical (MultiHash) container a shorter key, one value
// for each of the leading paths, scopes it to every logical partition under
// that prefix: the JavaScript SDK sends such a prefix in the partition key
// header of a query when the application passes a partial key. Because a
// MultiHash effective partition key is one hash per component, concatenated,
// a key prefix is a byte prefix of every item key beneath it.
func (c *Container) queryScope(pk PartitionKey) ([]byte, *Error) {
	if c.pk.Kind == "MultiHash" && len(pk) > 0 && len(pk) < len(c.pk.Paths) {
		return append(itemContainerPrefix(c.rid), effectivePartitionKey(&c.pk, pk)...), nil
	}
	p, err := c.partition(pk)
	if err != nil {
		return nil, err
	}
	return p.prefix, nil
}
