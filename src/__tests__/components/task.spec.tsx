/**
 * @jest-environment jsdom
 */

import { act, render, screen, waitFor } from '@testing-library/react';
import userEvent from '@testing-library/user-event';
import * as React from 'react';

import { TaskError, useTask } from '../../components/task';
import { apiError, deferred } from './fixtures';

/** A button run through `useTask`, its busy state and its failure with "Try again". */
function Runner(props: { action: (n: number) => Promise<unknown> }) {
  const task = useTask(props.action);
  return (
    <>
      <button disabled={task.busy} onClick={() => void task.run(7)}>
        Go
      </button>
      <TaskError error={task.error} onRetry={() => void task.retry()} />
    </>
  );
}

describe('useTask', () => {
  it('is busy while the action runs, and not after', async () => {
    const gate = deferred<void>();
    const action = jest.fn(() => gate.promise);
    render(<Runner action={action} />);
    await userEvent.click(screen.getByRole('button', { name: 'Go' }));
    expect(screen.getByRole('button', { name: 'Go' })).toBeDisabled();
    gate.resolve();
    await waitFor(() =>
      expect(screen.getByRole('button', { name: 'Go' })).toBeEnabled()
    );
    expect(action).toHaveBeenCalledWith(7);
    expect(screen.queryByRole('alert')).toBeNull();
  });

  it('drops a second run while the first is in flight', async () => {
    const gate = deferred<void>();
    const action = jest.fn(() => gate.promise);
    let run: ((n: number) => Promise<boolean>) | null = null;
    function Twice() {
      const task = useTask(action);
      run = task.run;
      return null;
    }
    render(<Twice />);
    let first!: Promise<boolean>;
    act(() => {
      first = run!(1);
    });
    let second = true;
    await act(async () => {
      second = await run!(2);
    });
    expect(second).toBe(false);
    await act(async () => {
      gate.resolve();
      expect(await first).toBe(true);
    });
    expect(action).toHaveBeenCalledTimes(1);
  });

  it("shows the API's message, and Try again runs the same call again", async () => {
    const action = jest
      .fn()
      .mockRejectedValueOnce(apiError(409, 'Conflict', 'the job already ended'))
      .mockResolvedValueOnce(undefined);
    render(<Runner action={action} />);
    await userEvent.click(screen.getByRole('button', { name: 'Go' }));
    expect(await screen.findByRole('alert')).toHaveTextContent(
      'the job already ended'
    );
    await userEvent.click(screen.getByRole('button', { name: 'Try again' }));
    await waitFor(() => expect(screen.queryByRole('alert')).toBeNull());
    expect(action.mock.calls).toEqual([[7], [7]]);
  });
});
