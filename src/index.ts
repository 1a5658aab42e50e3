import {
  ILayoutRestorer,
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import {
  Clipboard,
  Dialog,
  ICommandPalette,
  Notification,
  showDialog
} from '@jupyterlab/apputils';
import { ISettingRegistry } from '@jupyterlab/settingregistry';
import { IStatusBar } from '@jupyterlab/statusbar';

import { showBalanceDialog } from './balancedialog';
import { QuotaClient } from './client';
import { ADMIN_PANEL_ID, QuotaAdminPanel } from './components/AdminPanel';
import { QuotaSidebar } from './components/Sidebar';
import { PushSubscription } from './events';
import { quotaIcon } from './icons';
import { QuotaModel } from './model';
import { ProfileEditor } from './profileeditor';
import { QuotaStatus } from './statusbar';

/**
 * Command ids of the extension.
 */
namespace CommandIDs {
  export const open = 'jupyter-quota:open';
  export const refresh = 'jupyter-quota:refresh';
  export const plan = 'jupyter-quota:plan';
  export const showBalance = 'jupyter-quota:show-balance';
  export const openAdmin = 'jupyter-quota:open-admin';
}

/**
 * The arguments every command above takes, none, as `app.commands.describedBy(id)`
 * reports them to a caller.
 */
const NO_ARGS = { args: { type: 'object', properties: {} } };

const PLUGIN_ID = 'jupyter-quota:plugin';

/**
 * The frontend of jupyter_quota: a left-area panel with each team namespace's
 * balance, its jobs and a fine-tune planner; a status bar item with the free
 * GPUs; palette commands. One polling model feeds them all.
 */
const plugin: JupyterFrontEndPlugin<void> = {
  id: PLUGIN_ID,
  description:
    'Team GPU/CPU/memory quota balance and quota-checked fine-tuning jobs.',
  autoStart: true,
  optional: [ICommandPalette, ILayoutRestorer, IStatusBar, ISettingRegistry],
  activate: (
    app: JupyterFrontEnd,
    palette: ICommandPalette | null,
    restorer: ILayoutRestorer | null,
    statusBar: IStatusBar | null,
    settingRegistry: ISettingRegistry | null
  ) => {
    console.log('JupyterLab extension jupyter-quota is activated!');
    const serverSettings = app.serviceManager.serverSettings;
    const client = new QuotaClient(serverSettings);
    // Changes pushed over one EventSource; polls (conditional) only when it cannot be held.
    const model = new QuotaModel({
      client,
      push: handlers =>
        new PushSubscription({
          url: client.eventsUrl(),
          create: url => new EventSource(url, { withCredentials: true }),
          handlers
        })
    });
    let tailLines = 200;

    const sidebar = new QuotaSidebar({
      model,
      client,
      increases: client,
      confirm: Private.confirm,
      copy: Private.copy,
      tailLines: () => tailLines
    });
    app.shell.add(sidebar, 'left', { rank: 600 });
    restorer?.add(sidebar, sidebar.id);

    const open = () => app.shell.activateById(sidebar.id);
    if (statusBar) {
      statusBar.registerStatusItem('jupyter-quota:status', {
        item: new QuotaStatus(model, open),
        align: 'left',
        rank: 4,
        isActive: () => true
      });
    }

    app.commands.addCommand(CommandIDs.open, {
      describedBy: NO_ARGS,
      label: 'Open Team Quota Panel',
      caption: 'Balance, jobs and the fine-tune planner of your teams',
      icon: args => (args.isPalette ? undefined : quotaIcon),
      execute: open
    });
    // Only a quota admin gets the admin view; the API refuses `profiles` to anyone else anyway.
    let admin: QuotaAdminPanel | null = null;
    Private.whenAdmin(model, () => {
      const editor = new ProfileEditor({
        client,
        onSaved: () => model.refresh()
      });
      admin = new QuotaAdminPanel({
        model,
        editor,
        client,
        estimatorErrors: () => client.estimatorErrors()
      });
      app.shell.add(admin, 'left', { rank: 601 });
      restorer?.add(admin, admin.id);
      void editor.load();
      app.commands.notifyCommandChanged(CommandIDs.openAdmin);
    });
    app.commands.addCommand(CommandIDs.openAdmin, {
      describedBy: NO_ARGS,
      label: 'Open Quota Admin',
      caption:
        "Every team's balance, and their profiles to edit (quota admins)",
      isVisible: () => admin !== null,
      execute: () => app.shell.activateById(ADMIN_PANEL_ID)
    });

    app.commands.addCommand(CommandIDs.refresh, {
      describedBy: NO_ARGS,
      label: 'Refresh Team Quota',
      caption: 'Read the balance and jobs again now',
      execute: () => model.refresh()
    });
    app.commands.addCommand(CommandIDs.plan, {
      describedBy: NO_ARGS,
      label: 'Plan a Fine-Tune',
      caption: 'Estimate GPU memory and find the plan that fits your quota',
      execute: () => {
        open();
        requestAnimationFrame(() =>
          document.getElementById('jp-QuotaPlanner-model')?.focus()
        );
      }
    });
    app.commands.addCommand(CommandIDs.showBalance, {
      describedBy: NO_ARGS,
      label: 'Show Team Quota Balance',
      caption: 'GPU, CPU and memory left in each team namespace',
      execute: () => showBalanceDialog(client)
    });
    for (const command of Object.values(CommandIDs)) {
      palette?.addItem({ command, category: 'Quota' });
    }

    // Do not await: activation must not wait on the server or the settings.
    Private.logFirstPoll(model);
    if (settingRegistry) {
      settingRegistry.load(PLUGIN_ID).then(
        settings => {
          const apply = () => {
            model.refreshInterval =
              1000 * (settings.get('refreshInterval').composite as number);
            model.statusNamespace = settings.get('statusBarNamespace')
              .composite as string;
            tailLines = settings.get('logTailLines').composite as number;
          };
          apply();
          settings.changed.connect(apply);
        },
        reason => console.warn('jupyter-quota: settings not loaded', reason)
      );
    }
  }
};

export default plugin;

namespace Private {
  /**
   * Call `create` once, when the model first knows that the user is a quota admin.
   */
  export function whenAdmin(model: QuotaModel, create: () => void): void {
    const onChange = () => {
      if (model.identity) {
        model.changed.disconnect(onChange);
        if (model.identity.admin) {
          create();
        }
      }
    };
    model.changed.connect(onChange);
  }

  /**
   * Log once how many namespaces the user can see, or why they could not be read.
   */
  export function logFirstPoll(model: QuotaModel): void {
    const onChange = () => {
      model.changed.disconnect(onChange);
      console.log(
        model.error
          ? `jupyter-quota: ${model.error.message}`
          : `jupyter-quota: ${model.namespaces.length} namespace(s) visible`
      );
    };
    model.changed.connect(onChange);
  }

  export async function confirm(
    title: string,
    body: string,
    action = 'Cancel job'
  ): Promise<boolean> {
    const result = await showDialog({
      title,
      body,
      buttons: [
        Dialog.cancelButton({ label: 'Keep running' }),
        Dialog.warnButton({ label: action })
      ]
    });
    return result.button.accept;
  }

  export function copy(text: string): void {
    Clipboard.copyToSystem(text);
    Notification.success('Copied the %swift_sft line to the clipboard.', {
      autoClose: 3000
    });
  }
}
