// The marking page: one written question across the class, one answer at a time, by keyboard.
// Every text from the server (answers, comments, rubric texts) is put into the page with textContent,
// never as HTML; the server's Content-Security-Policy allows this file and app.css only.
"use strict";

const token = document.querySelector('meta[name="grader-token"]').content;
const $ = (id) => document.getElementById(id);
const view = { question: null, index: 0, picked: new Set() };

async function api(path, body) {
  const response = await fetch(path, {
    method: body === undefined ? "GET" : "POST",
    headers: { "X-Grader-Token": token, "Content-Type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
    credentials: "same-origin",
  });
  const data = await response.json();
  return { status: response.status, data };
}

function say(text) { $("message").textContent = text; }

function points(value) { return Number.isInteger(value) ? String(value) : value.toFixed(2).replace(/0+$/, ""); }

function current() { return view.question.answers[view.index]; }

function score() {
  const q = view.question;
  let total = q.rubric.start + Number($("adjust").value || 0);
  for (const item of q.rubric.items) if (view.picked.has(item.id)) total += item.points;
  return Math.min(Math.max(total, 0), q.points);
}

function counts() {
  const all = view.question.answers;
  const n = (s) => all.filter((a) => a.state === s).length;
  $("progress").textContent = `${n("marked")} marked, ${n("to re-mark")} to re-mark, ${n("to mark")} to mark, ` +
    `${n("no answer")} without an answer (${all.length} in all)`;
}

function drawRubric() {
  const list = $("rubric");
  list.replaceChildren();
  view.question.rubric.items.forEach((item, k) => {
    const li = document.createElement("li");
    li.dataset.item = item.id;
    li.classList.toggle("applied", view.picked.has(item.id));
    li.classList.toggle("negative", item.points < 0);
    const sign = item.points >= 0 ? "+" : "";
    li.textContent = `[${k < 9 ? k + 1 : " "}] ${item.id} (${sign}${points(item.points)}): ${item.text}`;
    if (item.note) {
      const note = document.createElement("div");
      note.className = "note";
      note.textContent = `marker's note: ${item.note}`;
      li.append(note);
    }
    li.addEventListener("click", () => toggle(item.id));
    list.append(li);
  });
  $("score").textContent = `${points(score())} / ${points(view.question.points)}`;
}

function show(index) {
  const q = view.question;
  view.index = (index + q.answers.length) % q.answers.length;
  const a = current();
  const mark = a.mark;
  view.picked = new Set(mark ? mark.items : []);
  $("adjust").value = mark ? mark.adjust : 0;
  $("comment").value = mark ? mark.comment : "";
  $("position").textContent = `${view.index + 1} / ${q.answers.length}`;
  $("answer-id").textContent = a.id;
  $("state").textContent = a.state + (a.state === "to re-mark" ? " (the earlier text's mark is shown)" : "");
  $("state").className = a.state.replaceAll(" ", "-");
  $("words").textContent = `${a.words} words` + (a.found === "heading" ? " (found by its heading)" : "");
  $("name").textContent = "";
  const text = $("text");
  text.textContent = a.text || "(no answer)";
  text.classList.toggle("empty", !a.text);
  text.scrollTop = 0;
  drawRubric();
  counts();
  document.body.dataset.answer = a.id;
  document.body.dataset.state = a.state;
}

function toggle(id) {
  if (view.picked.has(id)) view.picked.delete(id); else view.picked.add(id);
  drawRubric();
}

function nextPending(from) {
  const all = view.question.answers;
  for (let step = 1; step <= all.length; step++) {
    const k = (from + step) % all.length;
    if (all[k].state === "to mark" || all[k].state === "to re-mark") return k;
  }
  return null;
}

async function save() {
  const a = current();
  const adjust = Number($("adjust").value || 0);
  if (!Number.isFinite(adjust)) { say("the adjustment must be a number"); return; }
  const version = a.mark && a.mark.sha256 === a.sha256 ? a.mark.version : 0;
  const { status, data } = await api("/api/mark", {
    question: view.question.question, answer: a.id, sha256: a.sha256, items: [...view.picked],
    adjust, comment: $("comment").value, version,
  });
  if (status === 409) {
    a.mark = data.mark;
    show(view.index);
    say(`${data.error}`);
    return;
  }
  if (status !== 200) { say(data.error || `saving failed (${status})`); return; }
  Object.assign(a, { state: data.state, points: data.points, mark: data.mark });
  const next = nextPending(view.index);
  say(next === null ? `saved (${points(data.points)}); every answer to this question is marked` : `saved (${points(data.points)})`);
  show(next === null ? view.index + 1 : next);
}

async function load(questionId) {
  const { status, data } = await api(`/api/answers?question=${encodeURIComponent(questionId)}`);
  if (status !== 200) { say(data.error); return; }
  view.question = data;
  $("title").textContent = `${data.lab} · ${data.label} (${points(data.points)} points; ${data.words[0]}-${data.words[1]} words asked)`;
  $("prompt").textContent = data.prompt;
  $("rubric-notes").textContent = data.rubric.notes ? `marker's note: ${data.rubric.notes}` : "";
  $("desk").hidden = data.answers.length === 0;
  if (data.answers.length) {
    const first = nextPending(data.answers.length - 1);
    show(first === null ? 0 : first);
  }
  say("");
}

async function start() {
  const { data } = await api("/api/questions");
  const select = $("question");
  select.replaceChildren();
  for (const q of data) {
    const option = document.createElement("option");
    option.value = q.question;
    option.textContent = `${q.lab} ${q.label} (${points(q.points)} points): ${q.counts["to mark"]} to mark, ` +
      `${q.counts["to re-mark"]} to re-mark, ${q.answers} answers`;
    select.append(option);
  }
  const wanted = new URLSearchParams(location.hash.slice(1)).get("question");
  if (wanted && data.some((q) => q.question === wanted)) select.value = wanted;
  if (data.length) await load(select.value); else say("no written answers in this class folder yet");
  document.body.dataset.ready = "1";
}

async function showName() {
  const a = current();
  const { data } = await api(`/api/name?question=${encodeURIComponent(view.question.question)}&answer=${encodeURIComponent(a.id)}`);
  $("name").textContent = data.submission ? `submission ${data.submission}` : data.error;
}

document.addEventListener("keydown", (event) => {
  const inBox = ["INPUT", "TEXTAREA", "SELECT"].includes(document.activeElement.tagName);
  if (!view.question || !view.question.answers.length) return;
  if (inBox) {
    if (event.key === "Escape") { document.activeElement.blur(); drawRubric(); }
    else if (event.key === "Enter" && (event.ctrlKey || document.activeElement.id === "adjust")) {
      event.preventDefault(); document.activeElement.blur(); save();
    }
    return;
  }
  if (event.ctrlKey || event.metaKey || event.altKey) return;
  const items = view.question.rubric.items;
  if (/^[1-9]$/.test(event.key) && Number(event.key) <= items.length) toggle(items[Number(event.key) - 1].id);
  else if (event.key === "Enter") save();
  else if (event.key === "ArrowRight" || event.key === "j") show(view.index + 1);
  else if (event.key === "ArrowLeft" || event.key === "k") show(view.index - 1);
  else if (event.key === "c") $("comment").focus();
  else if (event.key === "a") $("adjust").focus();
  else if (event.key === "n") showName();
  else if (event.key === "r") load(view.question.question);
  else return;
  event.preventDefault();
});

$("question").addEventListener("change", (event) => { location.hash = `question=${event.target.value}`; load(event.target.value); });
$("adjust").addEventListener("input", drawRubric);
$("save").addEventListener("click", save);
$("next").addEventListener("click", () => show(view.index + 1));
$("prev").addEventListener("click", () => show(view.index - 1));
$("show-name").addEventListener("click", showName);
$("reload").addEventListener("click", () => view.question && load(view.question.question));
start();
