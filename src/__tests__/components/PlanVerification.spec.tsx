/**
 * @jest-environment jsdom
 */

import { render, screen, waitFor } from '@testing-library/react';
import userEvent from '@testing-library/user-event';
import * as React from 'react';

import {
  IVerificationClient,
  PlanVerification
} from '../../components/PlanVerification';
import { IEstimate, IVerification } from '../../tokens';
import { apiError, deferred, FakeVerifier, verification } from './fixtures';

const GIB = 2 ** 30;
const ARGS = ['--model', 'Qwen/Qwen2.5-0.5B-Instruct', '--tuner_type', 'lora'];
const ESTIMATE = { peakBytesPerGpu: 15 * GIB } as unknown as IEstimate;

function show(client: IVerificationClient, args = ARGS) {
  return render(
    <PlanVerification
      client={client}
      args={args}
      gpus={1}
      estimate={ESTIMATE}
      pollMs={5}
    />
  );
}

const verify = () =>
  userEvent.click(
    screen.getByRole('button', { name: 'Verify with a simulated step' })
  );

describe('PlanVerification', () => {
  it('shows progress while the step runs, reads it again, and shows the peak when it arrives', async () => {
    const client = new FakeVerifier();
    const second = deferred<IVerification>();
    client.verification
      .mockReturnValueOnce(Promise.resolve(verification('running')))
      .mockReturnValueOnce(second.promise);
    show(client);
    await verify();
    expect(await screen.findByRole('status')).toHaveTextContent(
      /Simulating one training step on the server… \d+ s/
    );
    await waitFor(() => expect(client.verification).toHaveBeenCalledTimes(2));
    expect(client.verification).toHaveBeenCalledWith('v1');
    expect(screen.queryByText(/Simulated step:/)).toBeNull();
    second.resolve(verification('done'));
    const shown = await screen.findByText(/Simulated step:/);
    // 13.5 GiB against a 15 GiB estimate
    expect(shown).toHaveTextContent('13.50 GiB per GPU (-10% of the estimate)');
    expect(shown).toHaveTextContent('measured runs add +0.50 GiB');
    expect(screen.queryByRole('status')).toBeNull();
  });

  it('says why a plan cannot be verified, without reading it again', async () => {
    const client = new FakeVerifier();
    client.startVerification.mockResolvedValueOnce(verification('unsupported'));
    show(client);
    await verify();
    expect(
      await screen.findByText(
        'Not verified: cannot simulate: --deepspeed zero2',
        { exact: false }
      )
    ).toBeInTheDocument();
    expect(client.verification).not.toHaveBeenCalled();
  });

  it('offers to try again after a failure or a busy server, and then verifies', async () => {
    const client = new FakeVerifier();
    client.startVerification.mockRejectedValueOnce(
      apiError(429, 'TooManyRequests', 'busy: 1 of 1 verifications running')
    );
    client.verification.mockResolvedValueOnce(verification('failed'));
    show(client);
    await verify();
    expect(
      await screen.findByText(/busy: 1 of 1 verifications running/)
    ).toBeInTheDocument();
    await userEvent.click(screen.getByRole('button', { name: 'Try again' }));
    expect(
      await screen.findByText(/Failed: the simulated step ran past 600 s/)
    ).toBeInTheDocument();
    await userEvent.click(screen.getByRole('button', { name: 'Try again' }));
    expect(await screen.findByText(/Simulated step:/)).toBeInTheDocument();
    expect(client.startVerification).toHaveBeenCalledTimes(3);
  });

  it('starts over for another plan, dropping the answer for the one before', async () => {
    const client = new FakeVerifier();
    const late = deferred<IVerification>();
    client.startVerification.mockReturnValueOnce(late.promise);
    const view = show(client);
    await verify();
    view.rerender(
      <PlanVerification
        client={client}
        args={[...ARGS, '--max_length', '512']}
        gpus={1}
        estimate={ESTIMATE}
        pollMs={5}
      />
    );
    late.resolve(verification('done'));
    expect(
      await screen.findByRole('button', {
        name: 'Verify with a simulated step'
      })
    ).toBeInTheDocument();
    await waitFor(() =>
      expect(screen.queryByText(/Simulated step:/)).toBeNull()
    );
  });
});
