// The console works without this script; with it, a new token and each DNS record of a domain
// have copy buttons, and the usage page updates itself every 5 seconds while it is visible.
for (const button of document.querySelectorAll("button[data-copy]")) {
  const field = document.getElementById(button.dataset.copy);
  const status = document.getElementById(button.dataset.status);
  button.hidden = false;
  button.addEventListener("click", async () => {
    try {
      await navigator.clipboard.writeText(field.value ?? field.textContent);
      status.textContent = "Copied to the clipboard.";
    } catch {
      if (field.select) field.select();
      else getSelection().selectAllChildren(field);
      status.textContent = "Selected: press Ctrl+C (or Cmd+C) to copy.";
    }
  });
}

const live = document.querySelector("[data-live]");
if (live) {
  setInterval(async () => {
    if (document.hidden) return;
    try {
      const res = await fetch(location.href, { headers: { Accept: "text/html" }, credentials: "same-origin" });
      if (!res.ok) return;
      const fresh = new DOMParser().parseFromString(await res.text(), "text/html").querySelector("[data-live]");
      if (fresh) live.replaceChildren(...fresh.childNodes);
    } catch {
      // Offline for a moment: the next round tries again.
    }
  }, 5_000);
}
