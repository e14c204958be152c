defmodule Nx.Serving.Output do
  @moduledoc false
  # A client's rows of a batch's output: each tensor of the output container sliced along
  # its first axis, and the parts of a request computed in several batches joined.

  @axis 0

  # rows `start..start + rows - 1` of every tensor of `output`
  def rows(output, start, rows) do
    Nx.Defn.Composite.traverse(output, fn tensor ->
      tensor = Nx.to_tensor(tensor)

      if start == 0 and Nx.axis_size(tensor, @axis) == rows,
        do: tensor,
        else: Nx.Batch.Rows.slice(tensor, start, rows)
    end)
  end

  # `parts` as {output, start, rows}, in the order of the request's rows: one container of
  # their rows, joined tensor by tensor
  def join([{output, start, rows}]), do: rows(output, start, rows)

  def join([{template, _, _} | _] = parts) do
    columns =
      parts
      |> Enum.map(fn {output, start, rows} ->
        output |> rows(start, rows) |> Nx.Defn.Composite.reduce([], &[&1 | &2]) |> Enum.reverse()
      end)
      |> Enum.zip_with(&Nx.Batch.Rows.join(&1, 0))

    {joined, []} =
      Nx.Defn.Composite.traverse(template, columns, fn _leaf, [column | rest] ->
        {column, rest}
      end)

    joined
  end
end
