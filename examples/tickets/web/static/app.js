// Cosmic Ticks: small enhancements; every page works without them.
document.addEventListener("DOMContentLoaded", () => {
  // Bring a fresh result into view and to the screen reader's attention.
  const result = document.getElementById("result");
  if (result && result.children.length > 0 && location.hash === "#result") {
    result.focus();
  }
  // The "Signed in as" picker switches user only with its Switch button:
  // arrowing through the names (which changes a closed select's value at
  // every key) must not sign anybody in.

  // Say which seat is chosen, next to the button that buys it.
  const chosen = document.querySelector("[data-chosen]");
  if (chosen) {
    const form = document.getElementById("seat-form");
    const say = () => {
      const seat = form.querySelector('input[name="seat"]:checked');
      if (seat) chosen.textContent = "Chosen: " + seat.dataset.label;
    };
    form.addEventListener("change", (e) => { if (e.target.name === "seat") say(); });
    say();
  }

  // The live activity logs: server-sent events from the change feed, each
  // list with its own filter (data-stream).
  document.querySelectorAll("[data-activity]").forEach((list) => {
    if (!window.EventSource) return;
    let last = 0;
    list.querySelectorAll("li[data-seq]").forEach((li) => { last = Math.max(last, Number(li.dataset.seq)); });
    const url = new URL(list.dataset.stream || "/activity/stream", location.href);
    url.searchParams.set("after", last);
    const keep = Number(list.dataset.keep || 8);
    const source = new EventSource(url);
    source.onmessage = (msg) => {
      const e = JSON.parse(msg.data);
      list.querySelectorAll(".empty-line").forEach((n) => n.remove());
      const li = document.createElement("li");
      li.dataset.seq = e.seq;
      const time = document.createElement("time");
      time.dateTime = e.at;
      time.textContent = new Date(e.at).toLocaleTimeString([], { hour12: false });
      const text = document.createElement("span");
      text.className = "kind-" + e.kind;
      text.textContent = e.text;
      li.append(time, text);
      list.prepend(li);
      while (list.children.length > keep) list.lastElementChild.remove();
    };
  });

  // The storm page: the running storm's counts and histogram, live.
  const storm = document.querySelector("[data-storm]");
  if (storm && storm.dataset.phase !== "done" && window.EventSource) {
    const field = (name) => storm.querySelector(`[data-field="${name}"]`);
    const show = (s) => {
      field("status").textContent = s.status;
      field("progress").value = s.answered;
      field("progress").textContent = `${s.answered} of ${s.buyers}`;
      for (const k of ["won", "taken", "failed"]) field(k).textContent = s[k];
      field("errors-box").classList.toggle("nonzero", s.failed > 0);
      s.buckets.forEach((b, i) => {
        const li = storm.querySelector(`[data-bucket="${i}"]`);
        li.querySelector("[data-field=count]").textContent = b.count;
        li.querySelector(".hist-bar").style.width = b.width + "%";
      });
      storm.dataset.phase = s.phase;
    };
    const source = new EventSource("/storm/stream?run=" + encodeURIComponent(storm.dataset.run));
    source.onmessage = (msg) => show(JSON.parse(msg.data));
    source.addEventListener("done", (msg) => {
      source.close();
      const s = JSON.parse(msg.data);
      show(s);
      const verdict = field("verdict");
      verdict.textContent = s.verdict;
      verdict.classList.toggle("verdict-good", s.ok);
      verdict.classList.toggle("verdict-bad", !s.ok);
      field("latencies").textContent = s.latencies;
      field("end").hidden = false;
      field("announce").textContent = s.status + " " + s.verdict;
      document.querySelectorAll("form[action='/storm'] button[disabled]").forEach((b) => { b.disabled = false; });
      document.querySelectorAll("[data-running-note]").forEach((n) => n.remove());
    });
  }
});
