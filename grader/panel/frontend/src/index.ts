/**
 * The course panel: for the open lab notebook, its tasks with their points and the result of each task's
 * last check, a button that checks one task, the written answers' status and the lab's progress; on the
 * class server, a hand-in button. Every number comes from the server extension (grader/panel/handlers.py),
 * which reads the notebook's saved file only: this file only draws what it answers.
 */
import { JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import { URLExt } from '@jupyterlab/coreutils';
import { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';
import { ServerConnection } from '@jupyterlab/services';
import { Widget } from '@lumino/widgets';

const ROUTE = 'course-panel';
const PANEL_ID = 'course-panel';
const OPEN = 'course-panel:open';

interface ITaskCheck {
  status: string;
  passed: number;
  checks: number;
  report: string;
}

interface ITaskState {
  id: string;
  title: string;
  points: number;
  hidden_points: number;
  exported: boolean;
  status: string;
  stale: boolean;
  check: ITaskCheck | null;
}

interface IWrittenState {
  id: string;
  label: string;
  points: number;
  status: string;
  words: number;
  message: string;
}

interface IPanelState {
  path: string;
  lab: string;
  title: string;
  tasks: ITaskState[];
  written: IWrittenState[];
  progress: {
    tasks: number;
    exported: number;
    passing: number;
    points: number;
    total_points: number;
    written: number;
    written_answered: number;
  };
  handin: boolean;
}

/** A JSON request to the panel's API; throws an Error with the server's message when it refuses. */
async function request(path: string, init: RequestInit = {}): Promise<any> {
  const settings = ServerConnection.makeSettings();
  const response = await ServerConnection.makeRequest(URLExt.join(settings.baseUrl, ROUTE, path), init, settings);
  const text = await response.text();
  let body: any = {};
  try {
    body = text ? JSON.parse(text) : {};
  } catch {
    body = { error: text };
  }
  if (!response.ok) {
    throw new Error(body.error || `HTTP ${response.status}`);
  }
  return body;
}

function element(tag: string, text = '', className = ''): HTMLElement {
  const node = document.createElement(tag);
  if (text) {
    node.textContent = text;
  }
  if (className) {
    node.className = className;
  }
  return node;
}

function points(value: number): string {
  return Number.isInteger(value) ? String(value) : value.toFixed(1);
}

/** The side panel itself. */
class CoursePanel extends Widget {
  private notebook: NotebookPanel | null = null;
  private state: IPanelState | null = null;
  private busy = '';
  private message = '';
  private receipt = '';

  constructor() {
    super();
    this.id = PANEL_ID;
    this.addClass('jp-CoursePanel');
    this.title.label = 'Course';
    this.title.caption = 'Course panel: tasks, checks, written answers, progress';
    this.render();
  }

  /** Follow ``panel`` (the notebook now open), or none. */
  follow(panel: NotebookPanel | null): void {
    if (panel === this.notebook) {
      return;
    }
    this.notebook = panel;
    this.state = null;
    this.message = '';
    this.receipt = '';
    if (panel) {
      panel.context.fileChanged.connect(() => {
        if (panel === this.notebook) {
          void this.refresh();
        }
      });
      void panel.context.ready.then(() => this.refresh());
    }
    this.render();
  }

  async refresh(): Promise<void> {
    const panel = this.notebook;
    if (!panel) {
      return;
    }
    try {
      this.state = await request(`state?path=${encodeURIComponent(panel.context.path)}`);
      this.message = '';
    } catch (error) {
      this.state = null;
      this.message = (error as Error).message;
    }
    this.render();
  }

  /** Save the notebook if it has changes (the checker reads the saved file), then run one task's checks. */
  async check(task: string): Promise<void> {
    const panel = this.notebook;
    if (!panel || this.busy) {
      return;
    }
    this.busy = task;
    this.render();
    try {
      if (panel.context.model.dirty) {
        await panel.context.save();
      }
      this.state = await request('check', {
        method: 'POST',
        body: JSON.stringify({ path: panel.context.path, task })
      });
      this.message = '';
    } catch (error) {
      this.message = (error as Error).message;
    }
    this.busy = '';
    this.render();
  }

  async handIn(): Promise<void> {
    const panel = this.notebook;
    if (!panel || this.busy) {
      return;
    }
    this.busy = 'handin';
    this.render();
    try {
      if (panel.context.model.dirty) {
        await panel.context.save();
      }
      const answer = await request('handin', { method: 'POST', body: JSON.stringify({ path: panel.context.path }) });
      this.receipt = answer.receipt;
      this.message = answer.handed_in ? '' : 'the hand-in did not go through: see below';
    } catch (error) {
      this.message = (error as Error).message;
    }
    this.busy = '';
    this.render();
  }

  private render(): void {
    const root = this.node;
    root.textContent = '';
    const state = this.state;
    if (!this.notebook) {
      root.appendChild(element('p', 'Open a lab notebook to see its tasks here.', 'jp-CoursePanel-note'));
      return;
    }
    if (!state) {
      root.appendChild(element('p', this.message || 'Reading the notebook...', 'jp-CoursePanel-note'));
      return;
    }
    root.appendChild(element('h2', `${state.lab}: ${state.title}`));
    const p = state.progress;
    const summary = element('p', '', 'jp-CoursePanel-progress');
    summary.textContent =
      `${p.passing}/${p.tasks} tasks pass their public checks (${points(p.points)} of ${points(p.total_points)} points), ` +
      `${p.exported}/${p.tasks} exported, ${p.written_answered}/${p.written} written answers`;
    root.appendChild(summary);
    root.appendChild(element('p', 'Checks run on the notebook as saved (it is saved first). Passing the public ' +
      'checks is necessary, not sufficient: the grader also runs hidden cases.', 'jp-CoursePanel-note'));
    if (this.message) {
      root.appendChild(element('p', this.message, 'jp-CoursePanel-error'));
    }
    const list = element('div', '', 'jp-CoursePanel-tasks');
    for (const task of state.tasks) {
      const row = element('div', '', `jp-CoursePanel-task jp-mod-${task.status.replace(/ /g, '-')}`);
      row.dataset.task = task.id;
      row.dataset.status = task.status;
      row.appendChild(element('div', `${task.id} ${task.title} (${points(task.points)} pts)`, 'jp-CoursePanel-title'));
      const line = element('div', '', 'jp-CoursePanel-line');
      const button = element('button', this.busy === task.id ? 'checking...' : 'Check', 'jp-CoursePanel-check') as HTMLButtonElement;
      button.disabled = this.busy !== '';
      button.title = `Run the public checks of task ${task.id} on the saved notebook`;
      button.onclick = () => void this.check(task.id);
      line.appendChild(button);
      const label = task.check && task.check.status !== 'error'
        ? `${task.status} (${task.check.passed}/${task.check.checks} checks)` : task.status;
      line.appendChild(element('span', label + (task.stale ? ', saved since' : ''), 'jp-CoursePanel-status'));
      row.appendChild(line);
      if (task.check) {
        const details = element('details', '', 'jp-CoursePanel-report');
        details.appendChild(element('summary', 'report'));
        details.appendChild(element('pre', task.check.report));
        row.appendChild(details);
      }
      list.appendChild(row);
    }
    root.appendChild(list);
    if (state.written.length) {
      root.appendChild(element('h3', 'Written answers (marked by a TA)'));
      const list = element('ul', '', 'jp-CoursePanel-written');
      for (const answer of state.written) {
        const item = element('li', `${answer.label} (${points(answer.points)} pts): ${answer.status}, ${answer.words} words`);
        item.dataset.question = answer.id;
        item.dataset.status = answer.status;
        if (answer.message) {
          item.appendChild(element('div', answer.message, 'jp-CoursePanel-note'));
        }
        list.appendChild(item);
      }
      root.appendChild(list);
    }
    if (state.handin) {
      const button = element('button', this.busy === 'handin' ? 'handing in...' : `Hand in ${state.lab}`,
        'jp-CoursePanel-handin') as HTMLButtonElement;
      button.disabled = this.busy !== '';
      button.onclick = () => void this.handIn();
      root.appendChild(button);
      if (this.receipt) {
        root.appendChild(element('pre', this.receipt, 'jp-CoursePanel-receipt'));
      }
    }
  }
}

const plugin: JupyterFrontEndPlugin<void> = {
  id: 'ml-cost-course-panel:plugin',
  description: 'The course panel for the open lab notebook',
  autoStart: true,
  requires: [INotebookTracker],
  activate: (app: JupyterFrontEnd, tracker: INotebookTracker) => {
    const panel = new CoursePanel();
    app.shell.add(panel, 'right', { rank: 50 });
    tracker.currentChanged.connect((_, current) => panel.follow(current));
    panel.follow(tracker.currentWidget);
    app.commands.addCommand(OPEN, {
      label: 'Open the course panel',
      execute: () => app.shell.activateById(PANEL_ID)
    });
  }
};

export default plugin;
