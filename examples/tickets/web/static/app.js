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
});
