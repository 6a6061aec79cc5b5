package pebble

import (
	"sync/atomic"
	"time"

	pebbledb "github.com/cockroachdb/pebble/v2"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// stalls counts the store's write stalls: times writers waited for a flush
// or for compactions to catch up.
type stalls struct {
	count atomic.Int64
	nanos atomic.Int64
	began atomic.Int64 // unix nanos of the stall in progress, 0 when none
}

func (s *stalls) listener() pebbledb.EventListener {
	return pebbledb.EventListener{
		WriteStallBegin: func(pebbledb.WriteStallBeginInfo) {
			s.count.Add(1)
			s.began.Store(time.Now().UnixNano())
		},
		WriteStallEnd: func() {
			if b := s.began.Swap(0); b != 0 {
				s.nanos.Add(time.Now().UnixNano() - b)
			}
		},
	}
}

var (
	descDisk        = prometheus.NewDesc("orrery_storage_disk_bytes", "Bytes the store occupies on disk.", nil, nil)
	descMemtable    = prometheus.NewDesc("orrery_storage_memtable_bytes", "Bytes held by memtables.", nil, nil)
	descCompactions = prometheus.NewDesc("orrery_storage_compactions_total", "Compactions run since the store opened.", nil, nil)
	descDebt        = prometheus.NewDesc("orrery_storage_compaction_debt_bytes", "Estimated bytes compactions must rewrite to settle the LSM.", nil, nil)
	descReadAmp     = prometheus.NewDesc("orrery_storage_read_amplification", "Sorted runs a point read may visit.", nil, nil)
	descFlushes     = prometheus.NewDesc("orrery_storage_flushes_total", "Memtable flushes since the store opened.", nil, nil)
	descStalls      = prometheus.NewDesc("orrery_storage_write_stalls_total", "Times writes stalled waiting for flushes or compactions.", nil, nil)
	descStallSecs   = prometheus.NewDesc("orrery_storage_write_stall_seconds_total", "Time writes spent stalled.", nil, nil)
	descCacheBytes  = prometheus.NewDesc("orrery_storage_block_cache_bytes", "Bytes of table blocks held by the block cache.", nil, nil)
	descCacheHits   = prometheus.NewDesc("orrery_storage_block_cache_hits_total", "Table block lookups answered by the block cache.", nil, nil)
	descCacheMisses = prometheus.NewDesc("orrery_storage_block_cache_misses_total", "Table block lookups that read the block from its file.", nil, nil)
	descWALSyncs    = prometheus.NewDesc("orrery_storage_wal_syncs_total", "Syncs of the write-ahead log to disk: concurrent commits share one (group commit).", nil, nil)
	descWALBytes    = prometheus.NewDesc("orrery_storage_wal_bytes_total", "Bytes written to the write-ahead log.", nil, nil)
)

// Describe implements prometheus.Collector.
func (s *Store) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descDisk, descMemtable, descCompactions, descDebt, descReadAmp, descFlushes, descStalls, descStallSecs, descCacheBytes, descCacheHits, descCacheMisses, descWALSyncs, descWALBytes} {
		ch <- d
	}
}

// Collect implements prometheus.Collector: the store's figures now.
func (s *Store) Collect(ch chan<- prometheus.Metric) {
	if s.acquire() != nil {
		return
	}
	m := s.db.Metrics()
	s.release()
	gauge := func(d *prometheus.Desc, v float64) { ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v) }
	counter := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v)
	}
	gauge(descDisk, float64(m.DiskSpaceUsage()))
	gauge(descMemtable, float64(m.MemTable.Size))
	counter(descCompactions, float64(m.Compact.Count))
	gauge(descDebt, float64(m.Compact.EstimatedDebt))
	gauge(descReadAmp, float64(m.ReadAmp()))
	counter(descFlushes, float64(m.Flush.Count))
	counter(descStalls, float64(s.stalls.count.Load()))
	counter(descStallSecs, time.Duration(s.stalls.nanos.Load()).Seconds())
	gauge(descCacheBytes, float64(m.BlockCache.Size))
	counter(descCacheHits, float64(m.BlockCache.Hits))
	counter(descCacheMisses, float64(m.BlockCache.Misses))
	counter(descWALSyncs, float64(walSyncs(m)))
	counter(descWALBytes, float64(m.WAL.BytesWritten))
}

// walSyncs is how many times the write-ahead log was synced: Pebble
// observes the latency of each sync, so its histogram's count.
func walSyncs(m *pebbledb.Metrics) uint64 {
	h := m.LogWriter.FsyncLatency
	if h == nil {
		return 0
	}
	var d dto.Metric
	if err := h.Write(&d); err != nil {
		return 0
	}
	return d.GetHistogram().GetSampleCount()
}
