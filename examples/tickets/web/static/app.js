// Cosmic Ticks: small enhancements; every page works without them.
document.addEventListener("DOMContentLoaded", () => {
  // Bring a fresh result into view and to the screen reader's attention.
  const result = document.getElementById("result");
  if (result && result.children.length > 0 && location.hash === "#result") {
    result.focus();
  }
  // Switch user as soon as one is picked.
  const sel = document.getElementById("user-select");
  if (sel) sel.addEventListener("change", () => sel.form.submit());

  // The live activity log: server-sent events from the change feed.
  const lists = document.querySelectorAll("[data-activity]");
  if (lists.length === 0 || !window.EventSource) return;
  let last = 0;
  lists.forEach((l) => l.querySelectorAll("li[data-seq]").forEach((li) => {
    last = Math.max(last, Number(li.dataset.seq));
  }));
  const source = new EventSource("/activity/stream?after=" + last);
  source.onmessage = (msg) => {
    const e = JSON.parse(msg.data);
    lists.forEach((list) => {
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
      const keep = list.classList.contains("activity-full") ? 200 : 8;
      while (list.children.length > keep) list.lastElementChild.remove();
    });
  };
});
