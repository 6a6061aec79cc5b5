package cosmostest

import (
	"context"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"
)

func TestStartGivesAWorkingEndpoint(t *testing.T) {
	s := Start(t)
	c := s.Client(t)
	if _, err := c.CreateDatabase(context.Background(), azcosmos.DatabaseProperties{ID: "probe"}, nil); err != nil {
		t.Fatalf("creating a database: %v", err)
	}
}
